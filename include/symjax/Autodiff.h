// Symbolic differentiation on the graph: gradients, jvp, jacobian, Hessian-vector products.
#pragma once

#include <symjax/Tensor.h>

#include <type_traits>
#include <vector>

namespace sj {

/// d cost / d wrt for each tensor in `wrt` (variables, placeholders or any intermediate node),
/// built as more graph by walking the graph in reverse and calling each op's gradient rule.
/// `cost` must be a 0-d float tensor. A wrt that cost does not depend on gets zeros.
std::vector<Tensor> gradients(const Tensor& cost, const std::vector<Tensor>& wrt);
/// The gradient with respect to one tensor. (A template so that `gradients(c, {x})` picks the
/// list overload above and returns a list, rather than this one.)
template <class T, class = std::enable_if_t<std::is_base_of_v<Tensor, T>>>
Tensor gradients(const Tensor& cost, const T& wrt) {
    return gradients(cost, std::vector<Tensor>{wrt})[0];
}

/// Vector-Jacobian product: sum_j cotangent_j * d outputs_j / d wrt (outputs of any shape;
/// cotangents shaped like them).
std::vector<Tensor> vjp(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                        const std::vector<Tensor>& wrt);

/// Jacobian-vector product d output / d wrt . tangent (forward mode, built as the transpose of
/// the vector-Jacobian product, which is linear in its cotangent).
Tensor jvp(const Tensor& output, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents);

/// Full Jacobian of `output` with respect to `wrt`: shape output.shape + wrt.shape.
/// The output's size must be known at build time (one vector-Jacobian product per element).
Tensor jacobian(const Tensor& output, const Tensor& wrt);

/// H v, where H is the Hessian of the scalar `cost` with respect to `wrt` (a double backward).
Tensor hessian_vector_product(const Tensor& cost, const Tensor& wrt, const Tensor& v);

} // namespace sj

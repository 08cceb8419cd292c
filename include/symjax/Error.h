// Error types and the SJ_CHECK / SJ_ASSERT macros: user errors throw, invariants assert.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace sj {

/// Base of every exception symjax throws. User input never aborts the process.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};
/// Shapes that do not fit an op (names the op, the shapes and the tensors).
class ShapeError : public Error {
public:
    using Error::Error;
};
/// Wrong dtype, or an op used on a dtype it does not support.
class TypeError : public Error {
public:
    using Error::Error;
};
/// Wrong value passed to a compiled function or a runtime kernel (count, dtype, shape, range).
class InputError : public Error {
public:
    using Error::Error;
};
/// A file that cannot be read or written, or whose content is malformed.
class IOError : public Error {
public:
    using Error::Error;
};
/// Text that does not follow its grammar (the text IR): names the line and column and what was
/// expected there.
class ParseError : public Error {
public:
    using Error::Error;
};
/// Memory could not be allocated: names the byte count and what it was for.
class OutOfMemoryError : public Error {
public:
    using Error::Error;
};
/// An internal invariant failed: a bug in symjax, not in the user's program.
class InternalError : public Error {
public:
    using Error::Error;
};

namespace detail {
/// Collects a message with operator<< and throws E when destroyed (only built on failure).
template <class E> class Thrower {
public:
    Thrower(const char* file, int line, const char* cond, bool internal) {
        if (internal)
            os_ << "internal error at " << file << ":" << line << " (" << cond
                << "), please report: ";
    }
    template <class T> Thrower& operator<<(const T& v) {
        os_ << v;
        return *this;
    }
    [[noreturn]] ~Thrower() noexcept(false) { throw E(os_.str()); }

private:
    std::ostringstream os_;
};
} // namespace detail

} // namespace sj

/// SJ_CHECK(cond, ErrorType) << "message": throws ErrorType(message) when cond is false.
#define SJ_CHECK(cond, E)                                                                          \
    if (__builtin_expect(!!(cond), 1)) {                                                           \
    } else                                                                                         \
        ::sj::detail::Thrower<E>(__FILE__, __LINE__, #cond, false)
/// SJ_ASSERT(cond) << "message": an internal invariant; throws InternalError (never aborts).
#define SJ_ASSERT(cond)                                                                            \
    if (__builtin_expect(!!(cond), 1)) {                                                           \
    } else                                                                                         \
        ::sj::detail::Thrower<::sj::InternalError>(__FILE__, __LINE__, #cond, true)
/// SJ_THROW(ErrorType) << "message": throws unconditionally.
#define SJ_THROW(E) ::sj::detail::Thrower<E>(__FILE__, __LINE__, "", false)

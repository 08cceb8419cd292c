// sj-doc-extract: turns the C++ blocks of one Markdown file into one test program (the
// conventions: docs/contributing.md, "Docs are tested"; tests/docs/CMakeLists.txt runs it).
//
//   sj-doc-extract <doc.md> <name> <out.cpp> <out.expected>
//
// A ```cpp block is a complete program: its main() is compiled as a function (the block keeps
// its own namespace) and the generated main() runs every program of the file in order, each
// after a marker line; out.expected holds the same markers, each followed by the ```output block
// that must come right after the program. A ```cpp fragment block is compiled as the body of a
// function that is never called; the names it uses without defining are that function's
// parameters, listed in an HTML comment `<!-- cpp fragment(params) -->` just before the block.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Block {
    enum class Kind { Program, Fragment } kind;
    int line = 0; // of the opening fence
    std::string params, code, output;
};

[[noreturn]] void fail(const std::string& file, int line, const std::string& what) {
    std::fprintf(stderr, "%s:%d: %s\n", file.c_str(), line, what.c_str());
    std::exit(1);
}

std::vector<Block> parse(const std::string& file) {
    std::ifstream in(file);
    if (!in)
        fail(file, 0, "cannot read");
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);)
        lines.push_back(l);
    std::vector<Block> blocks;
    static const std::regex params_re(R"(^<!--\s*cpp fragment\((.*)\)\s*-->\s*$)");
    std::string pending_params;
    bool has_params = false;
    auto fence_body =
        [&](size_t& i) { // i at the opening fence; returns the body, i after the close
            std::string body;
            size_t open = i;
            for (++i; i < lines.size() && lines[i].rfind("```", 0) != 0; ++i)
                body += lines[i] + "\n";
            if (i == lines.size())
                fail(file, int(open + 1), "unclosed code block");
            ++i;
            return body;
        };
    for (size_t i = 0; i < lines.size();) {
        const std::string& l = lines[i];
        std::smatch m;
        if (std::regex_match(l, m, params_re)) {
            pending_params = m[1];
            has_params = true;
            ++i;
            continue;
        }
        if (l.rfind("```", 0) != 0) {
            ++i;
            continue;
        }
        std::string info = l.substr(3);
        while (!info.empty() && info.back() == ' ')
            info.pop_back();
        int line = int(i + 1);
        if (info == "cpp" || info == "c++") {
            Block b{Block::Kind::Program, line, "", fence_body(i), ""};
            if (has_params)
                fail(file, line, "a `cpp fragment(...)` comment before a complete program");
            if (b.code.find("main(") == std::string::npos)
                fail(file, line,
                     "a ```cpp block is a complete program with a main(); mark a "
                     "fragment ```cpp fragment");
            size_t j = i;
            while (j < lines.size() && lines[j].empty())
                ++j;
            if (j == lines.size() || lines[j] != "```output")
                fail(file, line,
                     "a complete program needs the ```output block of what it prints "
                     "right after it");
            i = j;
            b.output = fence_body(i);
            blocks.push_back(std::move(b));
        } else if (info == "cpp fragment") {
            blocks.push_back({Block::Kind::Fragment, line, pending_params, fence_body(i), ""});
            has_params = false;
            pending_params.clear();
        } else {
            if (info.rfind("cpp", 0) == 0)
                fail(file, line, "unknown info string '" + info + "'");
            fence_body(i);
            has_params = false;
        }
    }
    return blocks;
}

/// Moves the #include lines of code to includes (they must be at file scope), leaving empty
/// lines so that #line keeps the Markdown's line numbers.
std::string hoist_includes(const std::string& code, std::string& includes) {
    std::istringstream in(code);
    std::string rest;
    for (std::string l; std::getline(in, l);) {
        bool include = l.rfind("#include", 0) == 0;
        if (include)
            includes += l + "\n";
        rest += (include ? "" : l) + "\n";
    }
    return rest;
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 5) {
        std::fprintf(stderr, "usage: sj-doc-extract <doc.md> <name> <out.cpp> <out.expected>\n");
        return 2;
    }
    std::string file = argv[1], name = argv[2];
    std::vector<Block> blocks = parse(file);
    std::string includes =
        "#include <symjax/nn.h>\n#include <symjax/symjax.h>\n\n#include <cstdio>\n"
        "#include <iostream>\n#include <type_traits>\n";
    std::ostringstream body, calls, expected;
    static const std::regex main_re(R"(\bint\s+main\s*\(\s*\))");
    for (const Block& b : blocks) {
        std::string ns = "doc_" + std::to_string(b.line);
        std::string code = hoist_includes(b.code, includes);
        body << "// " << name << ".md:" << b.line << "\nnamespace " << ns
             << " {\nusing namespace sj;\n";
        if (b.kind == Block::Kind::Program) {
            // main() becomes a function whose return type is deduced (void when it falls off
            // its end, as main may)
            std::string renamed = std::regex_replace(code, main_re, "auto doc_main()");
            if (renamed == code)
                fail(file, b.line, "no `int main()` in the program");
            body << "#line " << b.line + 1 << " \"" << file << "\"\n" << renamed;
            calls << "    run(\"" << name << ".md:" << b.line << "\", [] { return " << ns
                  << "::doc_main(); });\n";
            expected << "--- " << name << ".md:" << b.line << "\n" << b.output;
        } else {
            body << "[[maybe_unused]] void fragment(" << b.params << ") {\n#line " << b.line + 1
                 << " \"" << file << "\"\n"
                 << code << "}\n";
        }
        body << "} // namespace " << ns << "\n\n";
    }
    std::ofstream out(argv[3]);
    out << "// Generated from " << file << " by sj-doc-extract: edit the Markdown, not this file.\n"
        << includes << "\n"
        << body.str()
        << "namespace {\n"
           "int failures = 0;\n"
           "template <class F> void run(const char* where, F f) {\n"
           "    std::cout << \"--- \" << where << std::endl;\n"
           "    try {\n"
           "        if constexpr (std::is_void_v<decltype(f())>) f();\n"
           "        else if (int rc = f(); rc != 0) { std::cerr << where << \": returned \" << rc "
           "<< \"\\n\"; ++failures; }\n"
           "    } catch (const std::exception& e) {\n"
           "        std::cerr << where << \": threw: \" << e.what() << \"\\n\";\n"
           "        ++failures;\n"
           "    }\n"
           "    std::fflush(stdout);\n"
           "    std::cout.flush();\n"
           "}\n"
           "} // namespace\n\n"
           "int main() {\n"
        << calls.str() << "    return failures;\n}\n";
    std::ofstream(argv[4]) << expected.str();
    return out ? 0 : 1;
}

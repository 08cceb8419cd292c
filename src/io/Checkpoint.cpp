// safetensors checkpoints: validated reading, crash-safe writing, save/load of variables.
#include <symjax/Checkpoint.h>
#include <symjax/Variable.h>
#include <symjax/ir/VariableState.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <vector>

namespace sj {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Note [Checkpoint layout]: safetensors stores little-endian data; every host we build for is
// little-endian, and big-endian hosts byte-swap element by element on the way in and out.
constexpr bool kSwap = std::endian::native != std::endian::little;

void byte_swap(uint8_t* p, int64_t n, int esize) {
    for (int64_t i = 0; i < n; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
}

const char* st_name(DType t) {
    switch (t) {
    case DType::Bool: return "BOOL";
    case DType::U8: return "U8";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::U32: return "U32";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    }
    return "?";
}

bool st_dtype(const std::string& s, DType* out) {
    for (DType t : {DType::Bool, DType::U8, DType::I32, DType::I64, DType::U32, DType::F32,
                    DType::F64})
        if (s == st_name(t)) return *out = t, true;
    return false;
}

/// safetensors dtypes that symjax cannot hold (a clearer message than "unknown").
bool st_known_unsupported(const std::string& s) {
    for (const char* n : {"F16", "BF16", "I8", "I16", "U16", "U64", "F8_E4M3", "F8_E5M2",
                          "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"})
        if (s == n) return true;
    return false;
}

std::string at(const std::string& path, uint64_t off) {
    return path + ": byte " + std::to_string(off) + ": ";
}

/// Where the `nth` (1-based) spelling of `name` as an object key (its canonical JSON string,
/// then optional blanks and ':') starts in `text`, searching from `from`; npos if absent. A
/// string value cannot match: a value is followed by ',', ']' or '}', never by ':'.
size_t key_offset(const std::string& text, const std::string& name, size_t from, int nth) {
    const std::string quoted = nlohmann::json(name).dump();
    for (size_t p = text.find(quoted, from); p != std::string::npos; p = text.find(quoted, p + 1)) {
        size_t q = text.find_first_not_of(" \t\r\n", p + quoted.size());
        if (q != std::string::npos && text[q] == ':' && --nth == 0) return p;
    }
    return std::string::npos;
}

/// A tensor as found in a file, with where it was described and stored (for messages).
struct Entry {
    Array value;
    uint64_t header_offset = 0, data_offset = 0;
};

struct Parsed {
    std::map<std::string, Entry> tensors;
    std::map<std::string, std::string> metadata;
};

std::vector<uint8_t> read_all(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    SJ_CHECK(fd >= 0, IOError) << path << ": cannot open for reading (" << std::strerror(errno)
                               << ")";
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        SJ_THROW(IOError) << path << ": not a regular file";
    }
    std::vector<uint8_t> b(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < b.size()) {
        ssize_t r = ::read(fd, b.data() + got, b.size() - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = errno;
            ::close(fd);
            SJ_THROW(IOError) << at(path, got) << "read failed ("
                              << (r == 0 ? "unexpected end of file" : std::strerror(e)) << ")";
        }
        got += static_cast<size_t>(r);
    }
    ::close(fd);
    return b;
}

Parsed parse(const std::string& path, const std::vector<uint8_t>& b) {
    const uint64_t size = b.size();
    SJ_CHECK(size >= 8, IOError) << at(path, 0) << "file of " << size
                                 << " bytes is too short for the 8-byte header length";
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | b[i];
    SJ_CHECK(n <= size - 8, IOError) << at(path, 0) << "header length " << n
                                     << " exceeds the file size (" << size << " bytes, "
                                     << "header would end at byte " << (n > size ? n : n + 8)
                                     << ")";
    SJ_CHECK(n >= 2, IOError) << at(path, 0) << "header length " << n << " is too small for a "
                              << "JSON object";
    const std::string header(reinterpret_cast<const char*>(b.data() + 8), n);
    const uint64_t data_begin = 8 + n, data_size = size - data_begin;

    // Byte offset of a name's header entry (found by its JSON spelling), for messages.
    auto where = [&](const std::string& name, size_t from = 0) -> uint64_t {
        size_t p = header.find(json(name).dump(), from);
        return 8 + (p == std::string::npos ? 0 : p);
    };

    // nlohmann::json keeps the last of duplicate names (other readers keep the first): find
    // them at every depth while parsing, and refuse the file.
    std::vector<std::set<std::string>> open; // the names seen in each open object
    std::string entry;                       // the latest top-level name
    std::string duplicate, duplicate_entry;  // the first duplicate name, and its entry
    size_t duplicate_depth = 0;              // 1: a top-level name; 2+: in duplicate_entry
    json::parser_callback_t on_event = [&](int, json::parse_event_t ev, json& v) {
        if (ev == json::parse_event_t::object_start) {
            open.emplace_back();
        } else if (ev == json::parse_event_t::object_end) {
            if (!open.empty()) open.pop_back();
        } else if (ev == json::parse_event_t::key && !open.empty()) {
            const std::string& name = v.get_ref<const std::string&>();
            if (open.size() == 1) entry = name;
            if (!open.back().insert(name).second && duplicate.empty())
                duplicate = name, duplicate_entry = entry, duplicate_depth = open.size();
        }
        return true;
    };
    json j;
    try {
        j = json::parse(header, on_event);
    } catch (const json::parse_error& e) {
        SJ_THROW(IOError) << at(path, 8 + (e.byte ? e.byte - 1 : 0)) << "header is not valid JSON ("
                          << e.what() << ")";
    } catch (const json::exception& e) { // e.g. a number too large for a double (found by fuzzing)
        SJ_THROW(IOError) << at(path, 8) << "header cannot be read as JSON (" << e.what() << ")";
    }
    if (!duplicate.empty()) {
        // the second spelling of the name as a key, in the entry that holds it
        const size_t from = duplicate_depth == 1 ? 0 : key_offset(header, duplicate_entry, 0, 1);
        const size_t second =
            key_offset(header, duplicate, from == std::string::npos ? 0 : from, 2);
        const uint64_t off = 8 + (second == std::string::npos ? 0 : second);
        const char* reason = " (JSON readers disagree on which one counts)";
        SJ_CHECK(duplicate_depth != 1, IOError)
            << at(path, off) << "duplicate header entry '" << duplicate << "'" << reason;
        SJ_CHECK(duplicate_entry != "__metadata__", IOError)
            << at(path, off) << "__metadata__: duplicate key '" << duplicate << "'" << reason;
        SJ_THROW(IOError) << at(path, off) << "tensor '" << duplicate_entry
                          << "': duplicate field '" << duplicate << "'" << reason;
    }
    SJ_CHECK(j.is_object(), IOError) << at(path, 8) << "header is JSON but not an object";

    Parsed out;
    struct Span {
        uint64_t begin, end;
        std::string name;
    };
    std::vector<Span> spans;
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& name = it.key();
        const json& v = it.value();
        const uint64_t hoff = where(name);
        const std::string pre = at(path, hoff) + "tensor '" + name + "': ";
        if (name == "__metadata__") {
            SJ_CHECK(v.is_object(), IOError) << at(path, hoff) << "__metadata__ is not an object";
            for (auto m = v.begin(); m != v.end(); ++m) {
                SJ_CHECK(m.value().is_string(), IOError)
                    << at(path, hoff) << "__metadata__ value of '" << m.key()
                    << "' is not a string";
                out.metadata[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        SJ_CHECK(!name.empty(), IOError) << at(path, hoff) << "empty tensor name";
        SJ_CHECK(v.is_object(), IOError) << pre << "entry is not an object";
        for (auto f = v.begin(); f != v.end(); ++f)
            SJ_CHECK(f.key() == "dtype" || f.key() == "shape" || f.key() == "data_offsets",
                     IOError)
                << pre << "unknown field '" << f.key() << "'";
        SJ_CHECK(v.contains("dtype") && v["dtype"].is_string(), IOError)
            << pre << "missing or non-string \"dtype\"";
        const std::string ds = v["dtype"].get<std::string>();
        DType dtype;
        SJ_CHECK(st_dtype(ds, &dtype), IOError)
            << pre << "dtype \"" << ds << "\" "
            << (st_known_unsupported(ds) ? "is not supported by symjax"
                                         : "is not a safetensors dtype")
            << " (supported: F32, F64, I32, I64, U8, U32, BOOL)";
        SJ_CHECK(v.contains("shape") && v["shape"].is_array(), IOError)
            << pre << "missing or non-array \"shape\"";
        Shape shape;
        uint64_t count = 1;
        for (const json& d : v["shape"]) {
            SJ_CHECK(d.is_number_integer(), IOError) << pre << "shape " << v["shape"].dump()
                                                     << " holds a non-integer";
            SJ_CHECK(d.is_number_unsigned() || d.get<int64_t>() >= 0, IOError)
                << pre << "shape " << v["shape"].dump() << " has a negative dim";
            const uint64_t dim = d.get<uint64_t>();
            SJ_CHECK(dim == 0 || count <= (uint64_t(1) << 60) / dim, IOError)
                << pre << "shape " << v["shape"].dump() << " is too large";
            count *= dim;
            shape.push_back(static_cast<int64_t>(dim));
        }
        SJ_CHECK(v.contains("data_offsets") && v["data_offsets"].is_array() &&
                     v["data_offsets"].size() == 2,
                 IOError)
            << pre << "\"data_offsets\" must be an array [begin, end]";
        for (const json& o : v["data_offsets"])
            SJ_CHECK(o.is_number_unsigned(), IOError)
                << pre << "data_offsets " << v["data_offsets"].dump()
                << " must be non-negative integers";
        const uint64_t begin = v["data_offsets"][0].get<uint64_t>();
        const uint64_t end = v["data_offsets"][1].get<uint64_t>();
        SJ_CHECK(begin <= end && end <= data_size, IOError)
            << pre << "data_offsets [" << begin << ", " << end << "] out of range (the data "
            << "section holds " << data_size << " bytes from byte " << data_begin << ")";
        const uint64_t need = count * uint64_t(dtype_size(dtype));
        SJ_CHECK(end - begin == need, IOError)
            << pre << "data_offsets [" << begin << ", " << end << "] span " << end - begin
            << " bytes, but " << ds << shape_str(shape) << " needs " << need;
        spans.push_back({begin, end, name});
        Entry e;
        e.header_offset = hoff;
        e.data_offset = data_begin + begin;
        e.value = Array(dtype, shape);
        out.tensors.emplace(name, std::move(e));
    }

    // The tensors must tile the data section exactly: no gaps, no overlaps, nothing after.
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& c) {
        return a.begin != c.begin ? a.begin < c.begin : a.end < c.end;
    });
    uint64_t pos = 0;
    std::string prev;
    for (const Span& s : spans) {
        SJ_CHECK(s.begin >= pos, IOError)
            << at(path, data_begin + s.begin) << "tensor '" << s.name << "' overlaps tensor '"
            << prev << "' (data_offsets begin " << s.begin << " < " << pos << ")";
        SJ_CHECK(s.begin == pos, IOError)
            << at(path, data_begin + pos) << "gap of " << s.begin - pos << " bytes in the data "
            << "section before tensor '" << s.name << "' (tensors must be contiguous)";
        pos = s.end;
        prev = s.name;
    }
    SJ_CHECK(pos == data_size, IOError)
        << at(path, data_begin + pos) << data_size - pos << " bytes after the last tensor are "
        << "not described by the header";

    for (auto& [name, e] : out.tensors) {
        Array& a = e.value;
        if (a.nbytes() > 0) std::memcpy(a.raw(), b.data() + e.data_offset, a.nbytes());
        if (kSwap && dtype_size(a.dtype()) > 1)
            byte_swap(static_cast<uint8_t*>(a.raw()), a.size(), dtype_size(a.dtype()));
        if (a.dtype() == DType::Bool) {
            const auto* p = static_cast<const uint8_t*>(a.raw());
            for (int64_t i = 0; i < a.size(); ++i)
                SJ_CHECK(p[i] <= 1, IOError) << at(path, e.data_offset + i) << "tensor '" << name
                                             << "': BOOL byte " << int(p[i]) << " is not 0 or 1";
        }
    }
    return out;
}

Parsed read_parsed(const std::string& path) { return parse(path, read_all(path)); }

void write_all(int fd, const void* p, size_t n, const std::string& tmp) {
    const auto* c = static_cast<const uint8_t*>(p);
    while (n > 0) {
        ssize_t w = ::write(fd, c, std::min<size_t>(n, size_t(1) << 30));
        if (w < 0 && errno == EINTR) continue;
        SJ_CHECK(w > 0, IOError) << tmp << ": write failed (" << std::strerror(errno) << ")";
        c += w;
        n -= static_cast<size_t>(w);
    }
}

/// At most this many bytes of the checkpoint's file name start its temporary's name, so that any
/// name that fits NAME_MAX (255 bytes) leaves room for the ".tmp.<12 hex digits>" suffix.
constexpr size_t kTempPrefix = 64;

/// Creates a fresh temporary file next to `path` ("<name, cut to kTempPrefix bytes>.tmp.<12 hex
/// digits>", mode 0666 less the umask) and returns its descriptor; *tmp receives its path.
int create_temp(const std::string& path, std::string* tmp) {
    const fs::path p(path);
    std::string name = p.filename().string();
    if (name.size() > kTempPrefix) {
        size_t cut = kTempPrefix; // not inside a UTF-8 sequence (10xxxxxx continues one)
        while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
        name.resize(cut);
    }
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0;; ++attempt) {
        // splitmix64 of the process, a counter and the time: unique enough; O_EXCL makes sure
        uint64_t z =
            (uint64_t(::getpid()) << 40) ^ counter++ ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) *
                0x9e3779b97f4a7c15ULL;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        z ^= z >> 31;
        char hex[13];
        std::snprintf(hex, sizeof hex, "%012llx",
                      static_cast<unsigned long long>(z & 0xffffffffffffULL));
        *tmp = (p.parent_path() / (name + ".tmp." + hex)).string();
        int fd = ::open(tmp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST || attempt == 16) return fd;
    }
}

} // namespace

std::map<std::string, Array> read_safetensors(const std::string& path,
                                              std::map<std::string, std::string>* metadata) {
    Parsed p = read_parsed(path);
    if (metadata) *metadata = std::move(p.metadata);
    std::map<std::string, Array> out;
    for (auto& [name, e] : p.tensors) out.emplace(name, std::move(e.value));
    return out;
}

std::map<std::string, Array> read_safetensors(const std::string& path) {
    return read_safetensors(path, nullptr);
}

void write_safetensors(const std::string& path, const std::map<std::string, Array>& tensors,
                       const std::map<std::string, std::string>& metadata) {
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, a] : tensors) {
        SJ_CHECK(!name.empty() && name != "__metadata__", InputError)
            << path << ": invalid tensor name '" << name << "'";
        SJ_CHECK(a.defined(), InputError) << path << ": tensor '" << name << "' is undefined";
        header[name] = {{"dtype", st_name(a.dtype())},
                        {"shape", a.shape()},
                        {"data_offsets", {offset, offset + uint64_t(a.nbytes())}}};
        offset += uint64_t(a.nbytes());
    }
    std::string text;
    try {
        text = header.dump();
    } catch (const json::exception& e) {
        SJ_THROW(InputError) << path << ": cannot encode the header (" << e.what() << ")";
    }
    text.append((8 - (8 + text.size()) % 8) % 8, ' '); // align the data section to 8 bytes
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(uint64_t(text.size()) >> (8 * i));

    std::string dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
    std::string tmp;
    int fd = create_temp(path, &tmp);
    SJ_CHECK(fd >= 0, IOError) << path << ": cannot create the temporary file " << tmp << " ("
                               << std::strerror(errno) << ")";
    try {
        write_all(fd, len, 8, tmp);
        write_all(fd, text.data(), text.size(), tmp);
        std::vector<uint8_t> scratch;
        for (const auto& [name, a] : tensors) {
            const auto* p = static_cast<const uint8_t*>(a.raw());
            const auto nb = static_cast<size_t>(a.nbytes());
            if (a.dtype() == DType::Bool || (kSwap && dtype_size(a.dtype()) > 1)) {
                scratch.assign(p, p + nb);
                if (a.dtype() == DType::Bool)
                    for (auto& v : scratch) v = v != 0;
                else
                    byte_swap(scratch.data(), a.size(), dtype_size(a.dtype()));
                p = scratch.data();
            }
            if (nb) write_all(fd, p, nb, tmp);
        }
        SJ_CHECK(::fsync(fd) == 0, IOError) << tmp << ": fsync failed (" << std::strerror(errno)
                                            << ")";
        int rc = ::close(fd);
        fd = -1;
        SJ_CHECK(rc == 0, IOError) << tmp << ": close failed (" << std::strerror(errno) << ")";
        SJ_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, IOError)
            << path << ": cannot rename " << tmp << " over it (" << std::strerror(errno) << ")";
    } catch (...) {
        if (fd >= 0) ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    // Make the rename itself durable.
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    SJ_CHECK(dfd >= 0, IOError) << path << ": cannot open the folder " << dir << " to flush it ("
                                << std::strerror(errno) << ")";
    int rc = ::fsync(dfd);
    int e = errno;
    ::close(dfd);
    SJ_CHECK(rc == 0 || e == EINVAL, IOError)
        << path << ": fsync of the folder " << dir << " failed (" << std::strerror(e) << ")";
}

void save_variables(const std::string& path, const std::string& glob,
                    const std::map<std::string, std::string>& metadata) {
    std::vector<Variable> vars = get_variables(glob);
    SJ_CHECK(!vars.empty(), InputError)
        << "save_variables(" << path << "): no variable matches '" << glob << "'";
    std::map<std::string, Array> tensors;
    // one step's values of all of them (Note [Consistent snapshots] in Variable.cpp)
    std::vector<const detail::VariableState*> states;
    for (const Variable& v : vars) states.push_back(&v.state());
    std::vector<Array> values = detail::snapshot_values(states);
    for (size_t i = 0; i < vars.size(); ++i) tensors.emplace(vars[i].full_name(), std::move(values[i]));
    write_safetensors(path, tensors, metadata);
}

void load_variables(const std::string& path, const std::string& glob) {
    Parsed p = read_parsed(path);
    std::vector<Variable> vars = get_variables(glob);
    SJ_CHECK(!vars.empty(), InputError)
        << "load_variables(" << path << "): no variable matches '" << glob << "'";
    std::set<std::string> wanted;
    for (const Variable& v : vars) {
        const std::string& name = v.full_name();
        wanted.insert(name);
        auto it = p.tensors.find(name);
        const detail::VariableState& s = v.state();
        SJ_CHECK(it != p.tensors.end(), IOError)
            << path << ": no tensor for variable '" << name << "' (" << dtype_name(s.dtype)
            << shape_str(s.shape) << ")";
        const Array& a = it->second.value;
        SJ_CHECK(a.dtype() == s.dtype && a.shape() == s.shape, IOError)
            << at(path, it->second.header_offset) << "tensor '" << name << "' is "
            << a.type_str() << " but the variable is " << dtype_name(s.dtype)
            << shape_str(s.shape);
    }
    for (const auto& [name, e] : p.tensors)
        SJ_CHECK(!glob_match(glob, name) || wanted.count(name), IOError)
            << at(path, e.header_offset) << "tensor '" << name << "' matches '" << glob
            << "' but no live variable has that name";
    // Everything is decoded and checked: assign all at once for the calls that read them.
    std::vector<detail::VariableState*> states;
    std::vector<Array> values;
    for (const Variable& v : vars) {
        states.push_back(&v.state());
        values.push_back(std::move(p.tensors.at(v.full_name()).value));
    }
    detail::assign_values(states, std::move(values));
}

} // namespace sj

// collx/tune/json.hpp — the small JSON reader and writer that profiles
// (tune/profile_file.hpp) and collx-probe's reports use.
//
// json::parse(text) returns a value tree or throws json::parse_error with the
// line and column of the first problem; json::value::dump writes a value back
// (objects keep their key order, numbers round-trip exactly: 17 significant
// digits). Enough of RFC 8259 for configuration files: every value kind,
// string escapes including \uXXXX (encoded as UTF-8; surrogate pairs joined),
// nesting bounded at 64 levels. Host only.
#pragma once

#include <collx/config.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace collx::tune::json {

/// A syntax error, with where it is.
struct parse_error : std::runtime_error {
  int line, column;
  parse_error(const std::string& what, int l, int c)
      : std::runtime_error("line " + std::to_string(l) + ", column " + std::to_string(c) + ": " + what),
        line(l),
        column(c) {}
};

enum class kind { null, boolean, number, string, array, object };

inline const char* name(kind k) {
  constexpr const char* names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
  return names[static_cast<int>(k)];
}

/// A JSON value. Objects are lists of members in file order (duplicates are
/// a parse error), so what is written reads back in the same order; a
/// member is a value with its key (one container type for both kinds keeps
/// the parser small to compile).
struct value {
  kind type = kind::null;
  bool b = false;
  double num = 0;
  std::string str;
  std::string key;             // as a member of an object
  std::vector<value> items;    // array
  std::vector<value> members;  // object: each with its key

  value() = default;
  value(double d) : type(kind::number), num(d) {}
  value(int i) : type(kind::number), num(i) {}
  value(bool v) : type(kind::boolean), b(v) {}
  value(const char* s) : type(kind::string), str(s) {}
  value(std::string s) : type(kind::string), str(std::move(s)) {}
  static value object() {
    value v;
    v.type = kind::object;
    return v;
  }
  static value array() {
    value v;
    v.type = kind::array;
    return v;
  }

  /// The member `key` of an object, or nullptr.
  const value* find(const std::string& k) const {
    for (const value& m : members)
      if (m.key == k) return &m;
    return nullptr;
  }
  /// Sets (or adds, at the end) member `key`; returns it.
  value& set(const std::string& k, value v) {
    v.key = k;
    for (value& m : members)
      if (m.key == k) return m = std::move(v);
    members.push_back(std::move(v));
    return members.back();
  }
  value& push(value v) {
    items.push_back(std::move(v));
    return items.back();
  }

  /// The text of this value; indent > 0 pretty-prints.
  std::string dump(int indent = 2) const {
    std::string out;
    write(out, indent, 0);
    if (indent > 0) out += '\n';
    return out;
  }

 private:
  static void write_string(std::string& out, const std::string& s) {
    out += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
    }
    out += '"';
  }
  void write(std::string& out, int indent, int depth) const {
    auto newline = [&](int d) {
      if (indent <= 0) return;
      out += '\n';
      out.append(static_cast<std::size_t>(indent * d), ' ');
    };
    switch (type) {
      case kind::null: out += "null"; break;
      case kind::boolean: out += b ? "true" : "false"; break;
      case kind::number: {
        if (!std::isfinite(num)) {
          out += "null";  // JSON has no infinities
          break;
        }
        char buf[32];
        for (int prec = 15; prec <= 17; ++prec) {  // the shortest that reads back exactly
          std::snprintf(buf, sizeof buf, "%.*g", prec, num);
          if (std::strtod(buf, nullptr) == num) break;
        }
        out += buf;
        break;
      }
      case kind::string: write_string(out, str); break;
      case kind::array:
        out += '[';
        for (std::size_t i = 0; i < items.size(); ++i) {
          if (i > 0) out += ',';
          newline(depth + 1);
          items[i].write(out, indent, depth + 1);
        }
        if (!items.empty()) newline(depth);
        out += ']';
        break;
      case kind::object:
        out += '{';
        for (std::size_t i = 0; i < members.size(); ++i) {
          if (i > 0) out += ',';
          newline(depth + 1);
          write_string(out, members[i].key);
          out += indent > 0 ? ": " : ":";
          members[i].write(out, indent, depth + 1);
        }
        if (!members.empty()) newline(depth);
        out += '}';
        break;
    }
  }
};

namespace detail {

class parser {
 public:
  explicit parser(const std::string& text) : s_(text) {}

  COLLX_COLD value document() {
    value v = parse_value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  const std::string& s_;
  std::size_t i_ = 0;

  [[noreturn]] COLLX_COLD void fail(const std::string& what) const {
    int line = 1, col = 1;
    for (std::size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, col = 1;
      else ++col;
    }
    const bool at_end = i_ >= s_.size() && what.rfind("unexpected end", 0) != 0;
    throw parse_error(at_end ? "unexpected end of the text (truncated?): " + what : what, line, col);
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    skip_ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c, const char* where) {
    if (!eat(c)) fail(std::string("expected '") + c + "' " + where);
  }
  bool literal(const char* w) {
    std::size_t n = 0;
    while (w[n] != '\0') ++n;
    if (s_.compare(i_, n, w) != 0) return false;
    i_ += n;
    return true;
  }

  COLLX_COLD value parse_value(int depth) {
    if (depth > 64) fail("nesting deeper than 64 levels");
    skip_ws();
    if (i_ >= s_.size()) fail("unexpected end of the text (truncated?)");
    const char c = s_[i_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return value(parse_string());
    if (literal("true")) return value(true);
    if (literal("false")) return value(false);
    if (literal("null")) return value();
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    fail(std::string("unexpected character '") + c + "'");
  }

  COLLX_COLD value parse_object(int depth) {
    ++i_;
    value v = value::object();
    if (eat('}')) return v;
    do {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') fail("expected a key (a string) in the object");
      std::string key = parse_string();
      if (v.find(key) != nullptr) fail("duplicate key '" + key + "'");
      expect(':', "after a key");
      v.members.push_back(parse_value(depth + 1));
      v.members.back().key = std::move(key);
    } while (eat(','));
    expect('}', "or ',' in the object");
    return v;
  }

  COLLX_COLD value parse_array(int depth) {
    ++i_;
    value v = value::array();
    if (eat(']')) return v;
    do v.items.push_back(parse_value(depth + 1));
    while (eat(','));
    expect(']', "or ',' in the array");
    return v;
  }

  COLLX_COLD value parse_number() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    auto digits = [&] {
      const std::size_t d = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      return i_ > d;
    };
    if (!digits()) fail("a number needs digits");
    if (i_ < s_.size() && s_[i_] == '.' && (++i_, !digits())) fail("a number needs digits after '.'");
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (!digits()) fail("a number needs digits in its exponent");
    }
    return value(std::strtod(s_.substr(start, i_ - start).c_str(), nullptr));
  }

  COLLX_COLD static void utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  COLLX_COLD std::uint32_t hex4() {
    if (i_ + 4 > s_.size()) fail("a \\u escape needs four hex digits");
    std::uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      cp = cp * 16 + static_cast<std::uint32_t>(h >= '0' && h <= '9'   ? h - '0'
                                                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                : h >= 'A' && h <= 'F'
                                                    ? h - 'A' + 10
                                                    : (fail("bad hex digit in a \\u escape"), 0));
    }
    return cp;
  }

  COLLX_COLD std::string parse_string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {
            i_ += 2;
            const std::uint32_t lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          utf8(out, cp);
          break;
        }
        default: --i_, fail("unknown escape in a string");
      }
    }
  }
};

}  // namespace detail

/// Parses a whole JSON text; throws parse_error.
COLLX_COLD inline value parse(const std::string& text) { return detail::parser(text).document(); }

}  // namespace collx::tune::json

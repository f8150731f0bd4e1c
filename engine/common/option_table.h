// OptionTable: the keys of a config ("section.key") bound to fields of the
// component config structs, read from INI text (Boost.Program_options
// tokenizes it) and from --section.key=value command-line arguments, and
// written back out as INI. Every layer binds its own keys through one of these.
//
//   OptionTable t;
//   t.add("scheduler.max_num_seqs", &cfg.max_num_seqs, "most sequences running at once");
//   t.add_flag("output", &dir, "results directory");  // command line only, not a config key
//   t.parse(args, &ini_text, "exp.ini");               // the command line wins over the file
//
// Values are converted here, not by Boost: a bad value, an unknown key, a key
// set twice or an abbreviated one is a ConfigError that names the file and
// the key. (Boost's own error messages substitute placeholders such as
// %value% into user text and loop forever when the text contains one; they
// are never formatted.) A key may be bound to several fields of the same type
// and default (two routers sharing one parameter): every field receives the value.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace testbed {

std::string format_value(double v);
std::string format_value(float v);
std::string format_value(bool v);
std::string format_value(const std::string& v);
std::string format_value(int v);
std::string format_value(int64_t v);
std::string format_value(uint64_t v);

// Converts `text` into `out`; false when it is not a well-formed value of the
// type (integers must fit, numbers must be finite, booleans true/false/1/0/yes/no/on/off).
bool parse_value(const std::string& text, double& out);
bool parse_value(const std::string& text, float& out);
bool parse_value(const std::string& text, bool& out);
bool parse_value(const std::string& text, std::string& out);
bool parse_value(const std::string& text, int& out);
bool parse_value(const std::string& text, int64_t& out);
bool parse_value(const std::string& text, uint64_t& out);

class OptionTable {
 public:
  // A config key whose default is the field's current value.
  template <class T>
  void add(const std::string& key, T* target, const std::string& help) {
    add_entry(key, make_binding(target), help, Kind::Key);
  }
  // A config key that must be set (parse() fails without it).
  template <class T>
  void add_required(const std::string& key, T* target, const std::string& help) {
    add_entry(key, make_binding(target), help, Kind::Required);
  }
  // A file path: a relative value that does not exist from the working
  // directory but does beside the INI file is replaced by that path.
  void add_path(const std::string& key, std::string* target, const std::string& help);
  // A command-line flag of a command (--output DIR): not a config key, never
  // read from INI files, not part of resolved() or to_ini().
  template <class T>
  void add_flag(const std::string& name, T* target, const std::string& help) {
    add_entry(name, make_binding(target), help, Kind::Flag);
  }

  // Reads `args` (--key=value or --key value) and then, when given, the INI
  // text (`ini_origin` names it in errors and its directory resolves paths).
  // A key on the command line overrides the file.
  void parse(const std::vector<std::string>& args, const std::string* ini_text = nullptr,
             const std::string& ini_origin = "");
  // Sets one key as if it were read from `origin` (typed conversion and checks included).
  void set(const std::string& key, const std::string& value, const std::string& origin = "code");

  // Keys added between push_prefix(P) and pop_prefix() are P + key, and to_ini()
  // writes them in section P (without its final dot): a component binds the
  // same keys in several places, e.g. each pool's "pool.NAME.scheduler.*".
  void push_prefix(const std::string& prefix);
  void pop_prefix();
  // After parse(): every key PREFIX + K that was not set takes the current
  // value of K (it stays "not set"). Pools inherit the top-level keys this way.
  void inherit(const std::string& prefix);
  // Keys added between push_condition(K, V) and pop_condition() are used only
  // when key K (K after the current prefix, as add() would name it) has the
  // value V; nested conditions must all hold, and a key bound in several places
  // is used when any of them holds. Choice binds each candidate's keys so.
  void push_condition(const std::string& key, const std::string& value);
  void pop_condition();
  // Keys added between these two are used whatever the conditions around them
  // (a simulated driver's pools also serve the wall-clock disaggregated run).
  void suspend_conditions();
  void resume_conditions();
  // The value a condition on `key` compares with, when it is not the key's own
  // text (driver.mode = auto is simulated or realtime once resolved).
  void resolve_as(const std::string& key, const std::string& value);
  // After parse(): the keys a config set (to other than their default: a
  // resolved config.ini states every key) that the run will not use, since the
  // component they belong to is not the one chosen; each with why, e.g.
  // "router.weight_kv: not used: router.type is round_robin (it applies to router.type = weighted)".
  // A top-level key that a prefix inherit()s counts as used where the inheriting key is.
  std::vector<std::string> unused_keys() const;

  // The keys `args` and `ini_text` mention, without checking them (parse()
  // does): how a config's dynamic sections ([pool.NAME]) are discovered before binding.
  static std::vector<std::string> mentioned_keys(const std::vector<std::string>& args,
                                                 const std::string* ini_text);

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // Whether the last parse() set `key` (command line or file).
  bool was_set(const std::string& key) const;
  // The current value of `key` as text.
  std::string value(const std::string& key) const;
  // Its value before anything was set, as text.
  std::string default_value(const std::string& key) const;

  // Every config key with its current value, in registration order.
  std::vector<std::pair<std::string, std::string>> resolved() const;
  // The same, as an INI file grouped by section.
  std::string to_ini() const;
  // Every key and flag with its default and help, one per line (for --help).
  std::string help() const;

 private:
  enum class Kind { Key, Required, Path, Flag };
  struct Binding {
    std::string type;  // for "same type" checks and messages
    std::function<bool(const std::string&)> assign;
    std::function<std::string()> get;
  };
  using Condition = std::pair<std::string, std::string>;  // key, value
  struct Entry {
    std::string key, help, default_text;
    bool always_used = false;                          // bound outside any condition
    std::vector<std::vector<Condition>> used_when;     // else: any of these, all of its conditions
    std::string section;  // to_ini()'s section ("" : the key's first component)
    Kind kind = Kind::Key;
    std::vector<Binding> bindings;
    bool set = false;
  };

  template <class T>
  static Binding make_binding(T* target) {
    Binding b;
    b.type = type_name(static_cast<T*>(nullptr));
    b.assign = [target](const std::string& text) {
      T v{};
      if (!parse_value(text, v)) return false;
      *target = v;
      return true;
    };
    b.get = [target] { return format_value(*target); };
    return b;
  }
  static const char* type_name(double*) { return "a number"; }
  static const char* type_name(float*) { return "a number"; }
  static const char* type_name(bool*) { return "true or false"; }
  static const char* type_name(std::string*) { return "text"; }
  static const char* type_name(int*) { return "an integer"; }
  static const char* type_name(int64_t*) { return "an integer"; }
  static const char* type_name(uint64_t*) { return "a non-negative integer"; }

  void add_entry(const std::string& key, Binding binding, const std::string& help, Kind kind);
  void assign(Entry& e, const std::string& value, const std::string& origin);
  void parse_ini(const std::string& text, const std::string& origin, std::map<std::string, std::string>& values);

  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
  std::string config_dir_;
  bool conditions_hold(const Entry& e) const;

  std::vector<std::string> prefixes_;
  std::vector<Condition> conditions_;
  std::vector<std::vector<Condition>> suspended_;
  std::map<std::string, std::string> resolved_as_;
  std::vector<std::string> inherited_prefixes_;
};

// Sets keys of any config object that binds itself (`obj.bind(table)`), by name:
//   set_options(router, {{"router.type", "weighted"}, {"router.weight_kv", "0"}});
template <class Bindable>
void set_options(Bindable& obj, const std::vector<std::pair<std::string, std::string>>& values) {
  OptionTable t;
  obj.bind(t);
  for (const auto& [key, value] : values) t.set(key, value);
}

}  // namespace testbed

#include "rpcgen_via/checker.h"

#include <map>
#include <set>
#include <string>

namespace san::rpcgen {
namespace {

std::string Where(const SourcePos& p) {
  std::string s = p.file;
  s.append(":").append(std::to_string(p.line)).append(":").append(std::to_string(p.column));
  return s;
}

class Checker {
 public:
  Checker(const CheckOptions& options, Diagnostic* error) : options_(options), error_(error) {}

  bool Run(const Specification& spec) {
    for (const Definition& d : spec.definitions) {
      if (d.kind != DefKind::kPassthrough && d.kind != DefKind::kConst) kinds_[d.name] = &d;
    }
    for (const Definition& d : spec.definitions) {
      if (!CheckDefinition(d)) return false;
    }
    return true;
  }

 private:
  bool Fail(const SourcePos& pos, std::string message) {
    *error_ = Diagnostic{pos, std::move(message)};
    return false;
  }

  // Every name that becomes a C identifier at file scope: definitions, enumerators, programs,
  // versions and procedure macros (the latter may repeat across versions with the same value).
  bool Declare(const std::string& name, const SourcePos& pos, const char* what) {
    auto [it, fresh] = globals_.emplace(name, pos);
    if (!fresh) {
      std::string m = "redefinition of '";
      m.append(name)
          .append("' as ")
          .append(what)
          .append(" (first defined at ")
          .append(Where(it->second))
          .append(")");
      return Fail(pos, std::move(m));
    }
    return true;
  }

  bool CheckMembers(const std::vector<const Declaration*>& decls, const std::string& where) {
    std::map<std::string, SourcePos> seen;
    for (const Declaration* d : decls) {
      if (d->kind == DeclKind::kVoid) continue;
      auto [it, fresh] = seen.emplace(d->name, d->pos);
      if (!fresh) {
        std::string m = "duplicate member '";
        m.append(d->name)
            .append("' in ")
            .append(where)
            .append(" (first at ")
            .append(Where(it->second))
            .append(")");
        return Fail(d->pos, std::move(m));
      }
    }
    return true;
  }

  bool CheckDefinition(const Definition& d) {
    switch (d.kind) {
      case DefKind::kPassthrough:
        return true;
      case DefKind::kConst:
        return Declare(d.name, d.pos, "a constant");
      case DefKind::kEnum:
        if (!Declare(d.name, d.pos, "an enum")) return false;
        for (const EnumValue& v : d.enum_values) {
          if (!Declare(v.name, v.pos, "an enumerator")) return false;
        }
        return true;
      case DefKind::kStruct: {
        if (!Declare(d.name, d.pos, "a struct")) return false;
        std::vector<const Declaration*> members;
        for (const Declaration& f : d.fields) members.push_back(&f);
        return CheckMembers(members, "struct '" + d.name + "'");
      }
      case DefKind::kUnion: {
        if (!Declare(d.name, d.pos, "a union")) return false;
        if (!DiscriminantIsScalar(d.discriminant.type)) {
          return Fail(d.discriminant.pos,
                      "the discriminant of union '" + d.name +
                          "' must be int, unsigned int, bool or an enum, not '" +
                          d.discriminant.type.name + "'");
        }
        std::vector<const Declaration*> members = {&d.discriminant};
        std::set<std::string> labels;
        for (const UnionArm& arm : d.arms) {
          members.push_back(&arm.decl);
          for (const std::string& l : arm.labels) {
            if (!labels.insert(l).second) {
              return Fail(arm.decl.pos,
                          "duplicate case value '" + l + "' in union '" + d.name + "'");
            }
          }
        }
        if (d.has_default) members.push_back(&d.default_arm);
        return CheckMembers(members, "union '" + d.name + "'");
      }
      case DefKind::kTypedef:
        return Declare(d.name, d.pos, "a typedef");
      case DefKind::kProgram:
        return CheckProgram(d);
    }
    return true;
  }

  bool CheckProgram(const Definition& d) {
    if (!Declare(d.name, d.pos, "a program")) return false;
    std::set<std::string> version_numbers;
    for (const Version& v : d.versions) {
      if (!Declare(v.name, v.pos, "a version")) return false;
      if (!version_numbers.insert(v.number).second) {
        return Fail(v.pos, "duplicate version number " + v.number + " in program '" + d.name + "'");
      }
      std::set<std::string> numbers, names;
      for (const Procedure& p : v.procedures) {
        if (!numbers.insert(p.number).second) {
          return Fail(p.pos,
                      "duplicate procedure number " + p.number + " in version '" + v.name + "'");
        }
        if (!names.insert(p.name).second) {
          return Fail(p.pos, "duplicate procedure '" + p.name + "' in version '" + v.name + "'");
        }
        // A procedure name is a macro; it may recur in another version only with the same number.
        auto [it, fresh] = procedures_.emplace(p.name, p.number);
        if (!fresh && it->second != p.number) {
          return Fail(p.pos, "procedure '" + p.name + "' has number " + p.number + " here but " +
                                 it->second + " in an earlier version");
        }
        if (fresh && !Declare(p.name, p.pos, "a procedure")) return false;
        if (p.args.size() > 1 && !options_.newstyle) {
          return Fail(p.pos, "procedure '" + p.name +
                                 "' takes more than one argument; this needs -N (newstyle)");
        }
      }
    }
    return true;
  }

  // Follows typedefs: a struct, union or array type defined in this file cannot discriminate.
  // (A type from a C header is taken on trust, like every undefined type.)
  bool DiscriminantIsScalar(const TypeRef& type) const {
    TypeRef t = type;
    for (int hops = 0; hops < 32; ++hops) {
      auto it = kinds_.find(t.name);
      if (!t.prefix.empty() || it == kinds_.end()) return true;
      const Definition* d = it->second;
      if (d->kind == DefKind::kEnum) return true;
      if (d->kind != DefKind::kTypedef) return false;
      const Declaration& td = d->typedef_decl;
      if (td.kind != DeclKind::kPlain) return false;
      const std::string& n = td.type.name;
      if (n == "string" || n == "opaque" || n == "float" || n == "double" || n == "hyper" ||
          n == "unsigned hyper") {
        return false;
      }
      t = td.type;
    }
    return true;
  }

  CheckOptions options_;
  std::map<std::string, const Definition*> kinds_;
  Diagnostic* error_;
  std::map<std::string, SourcePos> globals_;
  std::map<std::string, std::string> procedures_;
};

}  // namespace

bool Check(const Specification& spec, const CheckOptions& options, Diagnostic* error) {
  return Checker(options, error).Run(spec);
}

}  // namespace san::rpcgen

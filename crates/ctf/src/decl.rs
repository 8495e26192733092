//! C declaration names of types: `char *`, `int [10]`, `struct foo`, `int (*)(char, ...)`,
//! `const char *`, in the style of libctf's `ctf_type_name`.

use crate::container::Container;
use crate::error::{CtfError, Result};
use crate::lookup::MAX_DEPTH;
use crate::model::*;

impl Container {
    /// The C name of type `id` as a declaration without a declarator name.
    pub fn type_name(&self, id: TypeId) -> Result<String> {
        self.decl(id, String::new(), 0)
    }

    fn decl(&self, id: TypeId, inner: String, depth: usize) -> Result<String> {
        if depth > MAX_DEPTH {
            return Err(CtfError::Cycle(id.0));
        }
        let join = |base: &str, inner: &str| {
            if inner.is_empty() {
                base.to_string()
            } else {
                format!("{base} {inner}")
            }
        };
        if id == TypeId::VOID {
            return Ok(join("void", &inner));
        }
        let t = self.get(id)?;
        match &t.kind {
            TypeKind::Pointer(target) => {
                let wrap = !matches!(
                    self.get(*target).map(|t| &t.kind),
                    Ok(TypeKind::Array(_)) | Ok(TypeKind::Function(_))
                ) || *target == TypeId::VOID;
                let inner = if wrap {
                    format!("*{inner}")
                } else {
                    format!("(*{inner})")
                };
                self.decl(*target, inner, depth + 1)
            }
            TypeKind::Array(a) => {
                self.decl(a.contents, format!("{inner}[{}]", a.nelems), depth + 1)
            }
            TypeKind::Function(f) if t.name.is_empty() || !inner.is_empty() => {
                let mut args = Vec::with_capacity(f.args.len() + 1);
                for &a in &f.args {
                    args.push(self.decl(a, String::new(), depth + 1)?);
                }
                if f.varargs {
                    args.push("...".into());
                }
                if args.is_empty() {
                    args.push("void".into());
                }
                self.decl(f.ret, format!("{inner}({})", args.join(", ")), depth + 1)
            }
            TypeKind::Const(b) | TypeKind::Volatile(b) | TypeKind::Restrict(b) => {
                let q = t.kind.kind_name();
                let over_pointer =
                    matches!(self.get(*b).map(|t| &t.kind), Ok(TypeKind::Pointer(_)));
                if over_pointer {
                    let inner = if inner.is_empty() {
                        q.to_string()
                    } else {
                        format!("{q} {inner}")
                    };
                    // "char *const": the qualifier follows the star
                    let s = self.decl(*b, String::new(), depth + 1)?;
                    Ok(format!("{s}{inner}"))
                } else {
                    Ok(join(
                        &format!("{q} {}", self.decl(*b, String::new(), depth + 1)?),
                        &inner,
                    ))
                }
            }
            TypeKind::Struct(_) | TypeKind::Forward(ForwardKind::Struct) => {
                Ok(join(&tagged("struct", &t.name), &inner))
            }
            TypeKind::Union(_) | TypeKind::Forward(ForwardKind::Union) => {
                Ok(join(&tagged("union", &t.name), &inner))
            }
            TypeKind::Enum(_) | TypeKind::Forward(ForwardKind::Enum) => {
                Ok(join(&tagged("enum", &t.name), &inner))
            }
            _ => Ok(join(&t.name, &inner)),
        }
    }
}

fn tagged(tag: &str, name: &str) -> String {
    if name.is_empty() {
        format!("{tag} (anon)")
    } else {
        format!("{tag} {name}")
    }
}

//! Human-readable dump of a container, as `ctfdump` prints it: header, labels, data objects,
//! functions, types (with members, sizes, offsets, enumerators) and string statistics.

use std::fmt::Write;

use crate::container::Container;
use crate::model::*;
use crate::read::CtfHeader;

/// What to include in a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DumpOptions {
    /// Header section.
    pub header: bool,
    /// Labels, data objects and function entries.
    pub sections: bool,
    /// Types.
    pub types: bool,
}

impl Default for DumpOptions {
    fn default() -> Self {
        DumpOptions {
            header: true,
            sections: true,
            types: true,
        }
    }
}

/// Renders the dump of `c` (with its on-disk header, if known).
pub fn dump(c: &Container, header: Option<&CtfHeader>, opts: DumpOptions) -> String {
    let mut o = String::new();
    if opts.header {
        if let Some(h) = header {
            let _ = writeln!(
                o,
                "- CTF Header -----------------------------------------------------------------\n"
            );
            let _ = writeln!(o, "  cth_magic    = 0xcff1");
            let _ = writeln!(o, "  cth_version  = {}", h.version);
            let _ = writeln!(o, "  cth_flags    = 0x{:02x}", h.flags);
            let _ = writeln!(o, "  cth_parlabel = {}", c.parent_label);
            let _ = writeln!(o, "  cth_parname  = {}", c.parent_name);
            let _ = writeln!(o, "  cth_lbloff   = {}", h.lbloff);
            let _ = writeln!(o, "  cth_objtoff  = {}", h.objtoff);
            let _ = writeln!(o, "  cth_funcoff  = {}", h.funcoff);
            let _ = writeln!(o, "  cth_typeoff  = {}", h.typeoff);
            let _ = writeln!(o, "  cth_stroff   = {}", h.stroff);
            let _ = writeln!(o, "  cth_strlen   = {}\n", h.strlen);
        }
    }
    if opts.sections {
        let _ = writeln!(
            o,
            "- Label Table ----------------------------------------------------------------\n"
        );
        for l in &c.labels {
            let _ = writeln!(o, "  {:5} {}", l.type_index, l.name);
        }
        let _ = writeln!(
            o,
            "\n- Data Objects ---------------------------------------------------------------\n"
        );
        for (i, t) in c.objects.iter().enumerate() {
            let _ = writeln!(o, "  [{i}] {t}");
        }
        let _ = writeln!(
            o,
            "\n- Functions ------------------------------------------------------------------\n"
        );
        for (i, f) in c.functions.iter().enumerate() {
            match f {
                None => {
                    let _ = writeln!(o, "  [{i}] (none)");
                }
                Some(f) => {
                    let args: Vec<String> = f.args.iter().map(|a| a.to_string()).collect();
                    let va = if f.varargs { ", ..." } else { "" };
                    let _ = writeln!(
                        o,
                        "  [{i}] returns {} args ({}{va})",
                        f.ret,
                        args.join(", ")
                    );
                }
            }
        }
        let _ = writeln!(o);
    }
    if opts.types {
        let _ = writeln!(
            o,
            "- Types ----------------------------------------------------------------------\n"
        );
        for (id, t) in c.iter() {
            dump_type(&mut o, c, id, t);
        }
    }
    o
}

fn name_of(c: &Container, id: TypeId) -> String {
    c.type_name(id).unwrap_or_else(|e| format!("<{e}>"))
}

/// Renders one type (and its members or enumerators) the way [`dump`] does.
pub fn dump_type(o: &mut String, c: &Container, id: TypeId, t: &Type) {
    let (open, close) = if t.root { ("<", ">") } else { ("[", "]") };
    let label = format!("  {open}{id}{close} ");
    let name = name_of(c, id);
    let size = c
        .size_of(id)
        .map(|s| s.to_string())
        .unwrap_or_else(|e| format!("<{e}>"));
    match &t.kind {
        TypeKind::Integer(e) => {
            let _ = writeln!(
                o,
                "{label}INTEGER {name} encoding=0x{:x} offset={} bits={} size={size}",
                e.flags, e.offset, e.bits
            );
        }
        TypeKind::Float(e) => {
            let _ = writeln!(
                o,
                "{label}FLOAT {name} encoding=0x{:x} offset={} bits={} size={size}",
                e.format, e.offset, e.bits
            );
        }
        TypeKind::Pointer(r) => {
            let _ = writeln!(o, "{label}POINTER {name} refers to {r}");
        }
        TypeKind::Typedef(r) => {
            let _ = writeln!(o, "{label}TYPEDEF {} refers to {r}", t.name);
        }
        TypeKind::Const(r) | TypeKind::Volatile(r) | TypeKind::Restrict(r) => {
            let _ = writeln!(
                o,
                "{label}{} {name} refers to {r}",
                t.kind.kind_name().to_uppercase()
            );
        }
        TypeKind::Array(a) => {
            let _ = writeln!(
                o,
                "{label}ARRAY {name} content: {} index: {} nelems: {} size={size}",
                a.contents, a.index, a.nelems
            );
        }
        TypeKind::Function(f) => {
            let args: Vec<String> = f.args.iter().map(|a| a.to_string()).collect();
            let va = if f.varargs { ", ..." } else { "" };
            let fname = if t.name.is_empty() {
                name
            } else {
                t.name.clone()
            };
            let _ = writeln!(
                o,
                "{label}FUNCTION {fname} returns: {} args: ({}{va})",
                f.ret,
                args.join(", ")
            );
        }
        TypeKind::Struct(ms) | TypeKind::Union(ms) => {
            let k = if matches!(t.kind, TypeKind::Struct(_)) {
                "STRUCT"
            } else {
                "UNION"
            };
            let _ = writeln!(
                o,
                "{label}{k} {name} (size {size} bytes, {} members)",
                ms.len()
            );
            for m in ms {
                let mt = name_of(c, m.type_id);
                let bits = match c
                    .resolve(m.type_id)
                    .ok()
                    .and_then(|r| c.get(r).ok())
                    .map(|t| &t.kind)
                {
                    Some(TypeKind::Integer(e)) if u64::from(e.bits) != t.size.saturating_mul(8) => {
                        let sz = c.size_of(m.type_id).unwrap_or(0);
                        if u64::from(e.bits) != sz.saturating_mul(8) {
                            format!(" :{}", e.bits)
                        } else {
                            String::new()
                        }
                    }
                    _ => String::new(),
                };
                let _ = writeln!(
                    o,
                    "\t{} type={} ({mt}{bits}) off={} bits (byte {})",
                    if m.name.is_empty() { "(anon)" } else { &m.name },
                    m.type_id,
                    m.offset_bits,
                    m.offset_bits / 8
                );
            }
        }
        TypeKind::Enum(es) => {
            let _ = writeln!(
                o,
                "{label}ENUM {name} (size {size} bytes, {} values)",
                es.len()
            );
            for e in es {
                let _ = writeln!(o, "\t{} = {}", e.name, e.value);
            }
        }
        TypeKind::Forward(_) => {
            let _ = writeln!(o, "{label}FORWARD {name}");
        }
        TypeKind::Unknown => {
            let _ = writeln!(o, "{label}UNKNOWN {} size={size}", t.name);
        }
    }
}

//! Parser of tracefs `format` files (`events/<subsystem>/<event>/format`): the event's id and the name,
//! C type, offset, size and signedness of each field of its trace record. The files are outside data:
//! every malformation is a [`LinuxError::BadFormat`], never a panic.

use crate::error::{LinuxError, Result};

/// The largest record offset we accept (the kernel's trace records are far smaller).
pub const MAX_RECORD: usize = 1 << 16;
/// The most fields we accept in one format file.
pub const MAX_FIELDS: usize = 1024;

/// One field of a trace record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (`filename`).
    pub name: String,
    /// C type as written, with any array bound kept (`const char *`, `char[16]`, `__data_loc char[]`).
    pub ctype: String,
    /// Byte offset in the record.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
    /// Whether the kernel marks it signed.
    pub signed: bool,
    /// For fixed arrays, the element count.
    pub array_len: Option<usize>,
    /// Whether this is a `__data_loc` field (a u32: offset in the low half, length in the high half,
    /// of bytes stored later in the record).
    pub data_loc: bool,
}

/// A parsed format file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    /// Event name (`sys_enter_openat`).
    pub name: String,
    /// Numeric event id (the perf tracepoint config).
    pub id: u64,
    /// The `common_*` fields.
    pub common: Vec<Field>,
    /// The event's own fields, in order.
    pub fields: Vec<Field>,
    /// The `print fmt:` line's text.
    pub print_fmt: String,
}

fn bad(path: &str, line: usize, reason: impl Into<String>) -> LinuxError {
    LinuxError::BadFormat {
        path: path.to_string(),
        line,
        reason: reason.into(),
    }
}

fn is_ident(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

/// Splits a field declaration such as `const char * filename` or `char comm[16]` into name, type and
/// array length.
fn split_decl(decl: &str) -> Option<(String, String, Option<usize>, bool)> {
    let decl = decl.trim();
    let (data_loc, decl) = match decl.strip_prefix("__data_loc ") {
        Some(rest) => (true, rest.trim()),
        None => (false, decl),
    };
    let (head, bound) = match decl.strip_suffix(']') {
        Some(d) => {
            let open = d.rfind('[')?;
            (d[..open].trim_end(), Some(d[open + 1..].trim()))
        }
        None => (decl, None),
    };
    let split = head
        .char_indices()
        .rev()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '_'))
        .map(|(i, c)| i + c.len_utf8())
        .unwrap_or(0);
    let (ty, name) = head.split_at(split);
    let ty = ty.trim();
    if !is_ident(name) {
        return None;
    }
    // `__data_loc char[] x` is written with the brackets on the type.
    let ty = ty.trim().to_string();
    let (ctype, array_len) = match bound {
        Some("") => (format!("{ty}[]"), None),
        Some(n) => {
            let len: usize = n.parse().ok().filter(|l| *l <= MAX_RECORD)?;
            (format!("{ty}[{len}]"), Some(len))
        }
        None => (ty, None),
    };
    if ctype.is_empty() {
        return None;
    }
    let ctype = if data_loc {
        format!("__data_loc {ctype}")
    } else {
        ctype
    };
    Some((name.to_string(), ctype, array_len, data_loc))
}

fn parse_attr(part: &str, key: &str) -> Option<usize> {
    part.trim()
        .strip_prefix(key)?
        .strip_prefix(':')?
        .trim()
        .parse()
        .ok()
}

fn parse_field(line: &str, path: &str, lineno: usize) -> Result<Field> {
    let mut parts = line.trim().split(';');
    let decl = parts
        .next()
        .and_then(|p| p.trim().strip_prefix("field:"))
        .ok_or_else(|| bad(path, lineno, "expected `field:`"))?;
    let (name, ctype, array_len, data_loc) = split_decl(decl)
        .ok_or_else(|| bad(path, lineno, format!("cannot parse declaration {decl:?}")))?;
    let offset = parts
        .next()
        .and_then(|p| parse_attr(p, "offset"))
        .ok_or_else(|| bad(path, lineno, "bad offset"))?;
    let size = parts
        .next()
        .and_then(|p| parse_attr(p, "size"))
        .ok_or_else(|| bad(path, lineno, "bad size"))?;
    let signed = parts
        .next()
        .and_then(|p| parse_attr(p, "signed"))
        .ok_or_else(|| bad(path, lineno, "bad signed"))?;
    if offset > MAX_RECORD || size > MAX_RECORD || offset + size > MAX_RECORD {
        return Err(bad(path, lineno, "field lies outside any trace record"));
    }
    if signed > 1 {
        return Err(bad(path, lineno, "signed is neither 0 nor 1"));
    }
    Ok(Field {
        name,
        ctype,
        offset,
        size,
        signed: signed == 1,
        array_len,
        data_loc,
    })
}

/// Parses a format file's text; `path` is used in errors.
pub fn parse_format(text: &str, path: &str) -> Result<EventFormat> {
    let mut name = None;
    let mut id = None;
    let mut common = Vec::new();
    let mut fields = Vec::new();
    let mut print_fmt = String::new();
    let mut in_format = false;
    for (i, line) in text.lines().enumerate() {
        let lineno = i + 1;
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = Some(
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| bad(path, lineno, "bad ID"))?,
            );
        } else if t == "format:" {
            in_format = true;
        } else if let Some(v) = t.strip_prefix("print fmt:") {
            print_fmt = v.trim().to_string();
            in_format = false;
        } else if t.starts_with("field:") {
            if !in_format {
                return Err(bad(path, lineno, "field outside the format section"));
            }
            if common.len() + fields.len() >= MAX_FIELDS {
                return Err(bad(path, lineno, "too many fields"));
            }
            let f = parse_field(t, path, lineno)?;
            if f.name.starts_with("common_") {
                common.push(f);
            } else {
                fields.push(f);
            }
        } else if !t.is_empty() && in_format {
            return Err(bad(path, lineno, format!("unexpected line {t:?}")));
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| bad(path, 0, "no name"))?;
    let id = id.ok_or_else(|| bad(path, 0, "no ID"))?;
    Ok(EventFormat {
        name,
        id,
        common,
        fields,
        print_fmt,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENAT: &str = "name: sys_enter_openat\nID: 782\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\nprint fmt: \"dfd: 0x%08lx\", ((unsigned long)(REC->dfd))\n";

    #[test]
    fn parses_a_syscall_format() {
        let f = parse_format(OPENAT, "x").unwrap();
        assert_eq!(f.name, "sys_enter_openat");
        assert_eq!(f.id, 782);
        assert_eq!(f.common.len(), 2);
        assert_eq!(f.fields.len(), 3);
        assert_eq!(f.fields[2].name, "filename");
        assert_eq!(f.fields[2].ctype, "const char *");
        assert_eq!(f.fields[2].offset, 24);
        assert!(f.fields[0].signed);
        assert!(f.print_fmt.starts_with("\"dfd"));
    }

    #[test]
    fn parses_arrays_and_data_loc() {
        let (n, t, l, d) = split_decl("char prev_comm[16]").unwrap();
        assert_eq!(
            (n.as_str(), t.as_str(), l, d),
            ("prev_comm", "char[16]", Some(16), false)
        );
        let (n, t, l, d) = split_decl("__data_loc char[] filename").unwrap();
        assert_eq!(
            (n.as_str(), t.as_str(), l, d),
            ("filename", "__data_loc char[]", None, true)
        );
        let (n, t, _, _) = split_decl("unsigned long *ptr").unwrap();
        assert_eq!((n.as_str(), t.as_str()), ("ptr", "unsigned long *"));
    }

    #[test]
    fn rejects_malformed_files() {
        assert!(parse_format("", "x").is_err());
        assert!(parse_format("name: a\nID: x\n", "x").is_err());
        assert!(parse_format(
            "name: a\nID: 1\nformat:\n\tfield:int a;\toffset:99999999;\tsize:4;\tsigned:1;\n",
            "x"
        )
        .is_err());
        assert!(parse_format(
            "name: a\nID: 1\nformat:\n\tfield:int ;\toffset:0;\tsize:4;\tsigned:1;\n",
            "x"
        )
        .is_err());
        assert!(parse_format(
            "name: a\nID: 1\nformat:\n\tfield:int a[x];\toffset:0;\tsize:4;\tsigned:1;\n",
            "x"
        )
        .is_err());
    }

    #[test]
    fn every_format_file_of_this_kernel_parses() {
        let Some(root) = super::super::find_tracefs() else {
            return;
        };
        let mut n = 0;
        for ev in super::super::list_events(&root).unwrap_or_default() {
            let p = root.join("events").join(&ev.0).join(&ev.1).join("format");
            if let Ok(text) = std::fs::read_to_string(&p) {
                parse_format(&text, &p.display().to_string()).unwrap();
                n += 1;
            }
        }
        assert!(n == 0 || n > 100, "only {n} format files");
    }
}

//! Stack records (`stack()`, `ustack()`, `jstack()`) and the symbol records (`sym()`, `mod()`, `usym()`,
//! `umod()`, `uaddr()`) printed as DTrace prints them: a newline, then one frame per line indented by
//! `stackindent` (14 by default) as `module`function+0xoffset`.

use dtrace_dif::program::{ActionKind, RecDesc};

use crate::cformat::{self, Spec};
use crate::error::{ConsumerError, Result};
use crate::recdata;
use crate::symbols::{self, Symbolizer};

/// DTrace's default `stackindent`.
pub const DEFAULT_STACKINDENT: usize = 14;

fn frame_line(out: &mut Vec<u8>, indent: usize, spec: Option<&Spec>, text: &str) {
    out.resize(out.len() + indent, b' ');
    match spec {
        Some(sp) => cformat::fmt_str(out, sp, text.as_bytes()),
        None => out.extend_from_slice(text.as_bytes()),
    }
    out.push(b'\n');
}

/// A kernel stack of `depth` frames of `size`-byte pcs (`dt_print_stack`).
pub fn print_stack(
    out: &mut Vec<u8>,
    syms: &dyn Symbolizer,
    b: &[u8],
    depth: usize,
    indent: usize,
    spec: Option<&Spec>,
) -> Result<()> {
    out.push(b'\n');
    if depth == 0 {
        return Ok(());
    }
    let size = b.len() / depth;
    if size != 4 && size != 8 {
        return Err(ConsumerError::SizeMismatch {
            size: b.len(),
            what: "stack()",
        });
    }
    for chunk in b.chunks_exact(size).take(depth) {
        let pc = recdata::uint(chunk).unwrap_or(0);
        if pc == 0 {
            break;
        }
        let text = symbols::addr_to_string(syms.kernel(pc), pc);
        frame_line(out, indent, spec, &text);
    }
    Ok(())
}

/// A user stack (`dt_print_ustack`): pid, `depth` pcs, then `strsize` bytes of helper strings.
pub fn print_ustack(
    out: &mut Vec<u8>,
    syms: &dyn Symbolizer,
    b: &[u8],
    arg: u64,
    indent: usize,
    spec: Option<&Spec>,
) -> Result<()> {
    let depth = (arg & 0xffff_ffff) as usize;
    let strsize = (arg >> 32) as usize;
    if depth == 0 {
        return Ok(());
    }
    let need = depth
        .checked_add(1)
        .and_then(|d| d.checked_mul(8))
        .and_then(|d| d.checked_add(strsize));
    if need.is_none_or(|n| n > b.len()) {
        return Err(ConsumerError::SizeMismatch {
            size: b.len(),
            what: "ustack()",
        });
    }
    let pid = recdata::u64_at(b, 0).unwrap_or(0);
    out.push(b'\n');
    let strbase = (depth + 1) * 8;
    let mut str_off = (strsize > 0).then_some(0usize);
    for i in 0..depth {
        let pc = recdata::u64_at(b, i + 1).unwrap_or(0);
        if pc == 0 {
            break;
        }
        let text = symbols::uaddr_to_string(syms, pid, pc);
        frame_line(out, indent, spec, &text);
        if let Some(off) = str_off {
            let s = recdata::cstr(&b[strbase + off..strbase + strsize]);
            if s.first() == Some(&b'@') {
                let note = format!("  [ {} ]", String::from_utf8_lossy(&s[1..]));
                frame_line(out, indent, spec, &note);
            }
            let n = off + s.len() + 1;
            str_off = (n < strsize).then_some(n);
        }
    }
    Ok(())
}

/// Any stack-like record by its action.
pub fn print_any(
    out: &mut Vec<u8>,
    syms: &dyn Symbolizer,
    rec: &RecDesc,
    b: &[u8],
    indent: usize,
    spec: Option<&Spec>,
) -> Result<()> {
    match rec.action {
        ActionKind::Stack => print_stack(out, syms, b, rec.arg as usize, indent, spec),
        ActionKind::Ustack | ActionKind::Jstack => {
            print_ustack(out, syms, b, rec.arg, indent, spec)
        }
        _ => Err(ConsumerError::SizeMismatch {
            size: b.len(),
            what: "%k (needs a stack)",
        }),
    }
}

/// `sym()`, `mod()`, `usym()`, `umod()`, `uaddr()` records in their default `  %-50s` layout.
pub fn print_symbol_record(
    out: &mut Vec<u8>,
    syms: &dyn Symbolizer,
    action: ActionKind,
    b: &[u8],
) -> Result<()> {
    let text = symbol_record_text(syms, action, b)?;
    out.extend_from_slice(format!("  {text:<50}").as_bytes());
    Ok(())
}

/// The text of a `sym()`, `mod()`, `usym()`, `umod()` or `uaddr()` record (`None` for other
/// records): what any printf conversion of such a record prints, as `dt_printf_format` switches
/// to the symbol printers for them.
pub fn symbol_text(syms: &dyn Symbolizer, action: ActionKind, b: &[u8]) -> Option<Result<String>> {
    matches!(
        action,
        ActionKind::Sym | ActionKind::Mod | ActionKind::Usym | ActionKind::Umod | ActionKind::Uaddr
    )
    .then(|| symbol_record_text(syms, action, b))
}

fn symbol_record_text(syms: &dyn Symbolizer, action: ActionKind, b: &[u8]) -> Result<String> {
    Ok(match action {
        ActionKind::Sym | ActionKind::Mod => {
            let pc = recdata::u64_at(b, 0).ok_or(ConsumerError::SizeMismatch {
                size: b.len(),
                what: "sym()/mod()",
            })?;
            let info = syms.kernel(pc);
            if action == ActionKind::Sym {
                symbols::sym_to_string(info, pc)
            } else {
                symbols::mod_to_string(info, pc)
            }
        }
        _ => {
            let (Some(pid), Some(pc)) = (recdata::u64_at(b, 0), recdata::u64_at(b, 1)) else {
                return Err(ConsumerError::SizeMismatch {
                    size: b.len(),
                    what: "usym()/umod()/uaddr()",
                });
            };
            match action {
                ActionKind::Umod => symbols::mod_to_string(syms.user(pid, pc), pc),
                ActionKind::Usym => symbols::usym_to_string(syms, pid, pc),
                _ => symbols::uaddr_to_string(syms, pid, pc),
            }
        }
    })
}

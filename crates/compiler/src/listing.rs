//! The `dtrace -S` listing: each clause's DIF objects disassembled with their tables. This is a
//! compact disassembler of our own, behind [`disassemble`], to be switched to the `dif` crate's
//! disassembler once it is available.

use std::fmt::Write;

use dtrace_dif::instr::Instr;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::Program;

/// Disassembles one DIF object.
pub fn disassemble(o: &DifObject) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "OFF OPCODE      INSTRUCTION");
    for (pc, w) in o.text.iter().enumerate() {
        let text = match Instr::decode(*w) {
            Ok(i) => instr_text(&i, o),
            Err(_) => format!("invalid {w:#010x}"),
        };
        let _ = writeln!(s, "{pc:02}: {w:08x}    {text}");
    }
    if !o.vartab.is_empty() {
        let _ = writeln!(s, "\nNAME             ID   KND SCP FLAG TYPE");
        for v in &o.vartab {
            let name = o
                .string_at(v.name as usize)
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{name:<16} {:<4x} {:<3} {:<3} {:<4} size {}",
                v.id,
                if v.kind == 0 { "arr" } else { "scl" },
                ["glb", "tls", "loc"].get(v.scope as usize).unwrap_or(&"?"),
                match v.flags & 3 {
                    1 => "r",
                    2 => "w",
                    3 => "r/w",
                    _ => "",
                },
                v.ty.size
            );
        }
    }
    let rt = &o.rtype;
    let _ = writeln!(
        s,
        "\nRETURN {}",
        if rt.is_string() {
            "string".to_string()
        } else {
            format!(
                "{}-byte{}",
                rt.size,
                if rt.is_by_ref() { " by ref" } else { "" }
            )
        }
    );
    s
}

fn instr_text(i: &Instr, o: &DifObject) -> String {
    let m = i.opcode().mnemonic();
    match *i {
        Instr::Alu { r1, r2, rd, .. } => format!("{m:<8}%r{r1}, %r{r2}, %r{rd}"),
        Instr::Not { r1, rd } | Instr::Mov { r1, rd } => format!("{m:<8}%r{r1}, %r{rd}"),
        Instr::Cmp { r1, r2 } | Instr::Scmp { r1, r2 } => format!("{m:<8}%r{r1}, %r{r2}"),
        Instr::Tst { r1 } => format!("{m:<8}%r{r1}"),
        Instr::Branch { label, .. } => format!("{m:<8}{label}"),
        Instr::Load { r1, rd, .. } => format!("{m:<8}[%r{r1}], %r{rd}"),
        Instr::Store { r1, rd, .. } => format!("{m:<8}%r{r1}, [%r{rd}]"),
        Instr::Ret { rd } => format!("{m:<8}%r{rd}"),
        Instr::Nop | Instr::Popts | Instr::Flushts => m.to_string(),
        Instr::Setx { idx, rd } => {
            let v = o.inttab.get(idx as usize).copied().unwrap_or(0);
            format!("{m:<8}DT_INTEGER[{idx}], %r{rd}\t\t! 0x{v:x}")
        }
        Instr::Sets { idx, rd } => {
            let v = o
                .string_at(idx as usize)
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            format!("{m:<8}DT_STRING[{idx}], %r{rd}\t\t! \"{v}\"")
        }
        Instr::LoadArray { var, r2, rd, .. } => format!("{m:<8}DT_VAR({var}), %r{r2}, %r{rd}"),
        Instr::LoadVar { var, rd, .. } => format!("{m:<8}DT_VAR({var}), %r{rd}"),
        Instr::StoreVar { var, rs, .. } => format!("{m:<8}%r{rs}, DT_VAR({var})"),
        Instr::Call { subr, rd } => {
            let n = dtrace_dif::subr::Subr::from_u16(subr)
                .map(|s| s.name())
                .unwrap_or("?");
            format!("{m:<8}DIF_SUBR({subr}), %r{rd}\t\t! {n}")
        }
        Instr::Pushtr { ty, r2, rs } => format!("{m:<8}DT_TYPE({ty}), %r{r2}, %r{rs}"),
        Instr::Pushtv { ty, rs } => format!("{m:<8}DT_TYPE({ty}), %r{rs}"),
        Instr::Allocs { r1, rd } => format!("{m:<8}%r{r1}, %r{rd}"),
        Instr::Copys { r1, r2, rd } => format!("{m:<8}%r{r1}, %r{r2}, %r{rd}"),
        Instr::Xlate { idx, rd, .. } => format!("{m:<8}DT_XLREF[{idx}], %r{rd}"),
    }
}

/// The whole `-S` listing of a program: per ECB, the predicate and each action's object.
pub fn listing(p: &Program) -> String {
    let mut s = String::new();
    for (n, ecb) in p.ecbs.iter().enumerate() {
        let d = &ecb.probe;
        let _ = writeln!(
            s,
            "\nDIFO for clause {n} ({}:{}:{}:{}):",
            d.provider, d.module, d.function, d.name
        );
        if let Some(pr) = &ecb.predicate {
            let _ = writeln!(s, "\n-- predicate --");
            s.push_str(&disassemble(pr));
        }
        for (i, a) in ecb.actions.iter().enumerate() {
            if let Some(o) = &a.difo {
                let _ = writeln!(s, "\n-- action #{} ({:?}) --", i + 1, a.kind);
                s.push_str(&disassemble(o));
            }
        }
    }
    s
}

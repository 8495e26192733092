//! The disassembler: a DIF object as `dtrace -S` lists it (DTrace's `dt_dis`): a `DIFO ... returns`
//! header, one line per instruction with offset, raw word, mnemonic and operands (table values as `!`
//! comments), then the variable table.

use std::fmt::Write;

use crate::object::{ctf_kind, DifObject, DifType, VarEntry};
use crate::object::{DIFV_F_MOD, DIFV_F_REF, DIFV_KIND_ARRAY, DIFV_KIND_SCALAR};
use crate::object::{DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD};
use crate::object::{DIF_TF_BYREF, DIF_TF_BYUREF, DIF_TYPE_CTF, DIF_TYPE_STRING};
use crate::opcode::Opcode;
use crate::subr::Subr;

/// A DIF type as DTrace prints it: `D type (integer) (size 4)`, `string (unknown) by ref (size 256)`.
pub fn type_str(t: &DifType) -> String {
    let kind = match t.kind {
        DIF_TYPE_CTF => "D type".to_string(),
        DIF_TYPE_STRING => "string".to_string(),
        k => format!("0x{k:x}"),
    };
    let ckind = match t.ckind {
        ctf_kind::UNKNOWN => "unknown".to_string(),
        ctf_kind::INTEGER => "integer".to_string(),
        ctf_kind::FLOAT => "float".to_string(),
        ctf_kind::POINTER => "pointer".to_string(),
        ctf_kind::ARRAY => "array".to_string(),
        ctf_kind::FUNCTION => "function".to_string(),
        ctf_kind::STRUCT => "struct".to_string(),
        ctf_kind::UNION => "union".to_string(),
        ctf_kind::ENUM => "enum".to_string(),
        ctf_kind::FORWARD => "forward".to_string(),
        ctf_kind::TYPEDEF => "typedef".to_string(),
        ctf_kind::VOLATILE => "volatile".to_string(),
        ctf_kind::CONST => "const".to_string(),
        ctf_kind::RESTRICT => "restrict".to_string(),
        k => format!("0x{k:x}"),
    };
    if t.flags & (DIF_TF_BYREF | DIF_TF_BYUREF) != 0 {
        let user = if t.flags & DIF_TF_BYUREF != 0 {
            "user "
        } else {
            ""
        };
        format!("{kind} ({ckind}) by {user}ref (size {})", t.size)
    } else {
        format!("{kind} ({ckind}) (size {})", t.size)
    }
}

fn var_name(obj: &DifObject, id: u32, scope: u8) -> Option<String> {
    obj.vartab
        .iter()
        .find(|v| v.id == id && v.scope == scope)
        .and_then(|v| obj.string_at(v.name as usize))
        .map(|s| String::from_utf8_lossy(s).into_owned())
}

fn scope_of(op: Opcode) -> u8 {
    use Opcode::*;
    match op {
        Ldta | Ldts | Stts | Ldtaa | Sttaa => DIFV_SCOPE_THREAD,
        Ldls | Stls => DIFV_SCOPE_LOCAL,
        _ => DIFV_SCOPE_GLOBAL,
    }
}

/// The text of one instruction (mnemonic, operands, `!` comment), without offset and word.
pub fn instr_text(obj: &DifObject, word: u32) -> String {
    use Opcode::*;
    let r1 = (word >> 16) & 0xff;
    let r2 = (word >> 8) & 0xff;
    let rd = word & 0xff;
    let idx = (word >> 8) & 0xffff;
    let Some(op) = Opcode::from_u8((word >> 24) as u8) else {
        return format!("{:<4} {}", "invalid opcode", word >> 24);
    };
    let n = op.mnemonic();
    let varc = |id: u32| {
        var_name(obj, id, scope_of(op))
            .map(|v| format!("\t\t! DT_VAR({id}) = \"{v}\""))
            .unwrap_or_default()
    };
    match op {
        Or | Xor | And | Sll | Srl | Sra | Sub | Add | Mul | Sdiv | Udiv | Srem | Urem | Copys => {
            format!("{n:<4} %r{r1}, %r{r2}, %r{rd}")
        }
        Not | Mov | Allocs => format!("{n:<4} %r{r1}, %r{rd}"),
        Cmp | Scmp => format!("{n:<4} %r{r1}, %r{r2}"),
        Tst => format!("{n:<4} %r{r1}"),
        Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => {
            format!("{n:<4} {}", word & 0x00ff_ffff)
        }
        Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx | Uldsb | Uldsh | Uldsw | Uldub | Ulduh
        | Ulduw | Uldx | Rldsb | Rldsh | Rldsw | Rldub | Rlduh | Rlduw | Rldx => {
            format!("{n:<4} [%r{r1}], %r{rd}")
        }
        Stb | Sth | Stw | Stx => format!("{n:<4} %r{r1}, [%r{rd}]"),
        Ret => format!("{n:<4} %r{rd}"),
        Nop | Popts | Flushts => n.to_string(),
        Setx => {
            let mut s = format!("{n:<4} DT_INTEGER[{idx}], %r{rd}");
            if let Some(v) = obj.inttab.get(idx as usize) {
                let _ = write!(s, "\t\t! 0x{v:x}");
            }
            s
        }
        Sets => {
            let mut s = format!("{n:<4} DT_STRING[{idx}], %r{rd}");
            if let Some(v) = obj.string_at(idx as usize) {
                let _ = write!(s, "\t\t! \"{}\"", String::from_utf8_lossy(v));
            }
            s
        }
        Ldga | Ldta => format!("{n:<4} DT_VAR({r1}), %r{r2}, %r{rd}{}", varc(r1)),
        Ldgs | Ldts | Ldls | Ldgaa | Ldtaa => format!("{n:<4} DT_VAR({idx}), %r{rd}{}", varc(idx)),
        Stgs | Stts | Stls | Stgaa | Sttaa => format!("{n:<4} %r{rd}, DT_VAR({idx}){}", varc(idx)),
        Call => {
            let name = Subr::from_u16(idx as u16)
                .map(|s| s.name())
                .unwrap_or("unknown");
            format!("{n:<4} DIF_SUBR({idx}), %r{rd}\t\t! {name}")
        }
        Pushtr | Pushtv => {
            let mut s = format!("{n:<4} DT_TYPE({r1}), %r{r2}, %r{rd}");
            match r1 {
                0 => s.push_str("\t! DT_TYPE(0) = D type"),
                1 => s.push_str("\t! DT_TYPE(1) = string"),
                _ => {}
            }
            s
        }
        Xlate | Xlarg => format!("{n:<4} DT_XLREF[{idx}], %r{rd}"),
    }
}

fn var_line(obj: &DifObject, v: &VarEntry) -> String {
    let name = obj
        .string_at(v.name as usize)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .unwrap_or_default();
    let kind = match v.kind {
        DIFV_KIND_ARRAY => "arr".to_string(),
        DIFV_KIND_SCALAR => "scl".to_string(),
        k => k.to_string(),
    };
    let scope = match v.scope {
        DIFV_SCOPE_GLOBAL => "glb".to_string(),
        DIFV_SCOPE_THREAD => "tls".to_string(),
        DIFV_SCOPE_LOCAL => "loc".to_string(),
        s => s.to_string(),
    };
    let mut flags = String::new();
    let other = v.flags & !(DIFV_F_REF | DIFV_F_MOD);
    if other != 0 {
        let _ = write!(flags, "/0x{other:x}");
    }
    if v.flags & DIFV_F_REF != 0 {
        flags.push_str("/r");
    }
    if v.flags & DIFV_F_MOD != 0 {
        flags.push_str("/w");
    }
    let flags = flags.get(1..).unwrap_or("");
    format!(
        "{name:<16} {:<4x} {kind:<3} {scope:<3} {flags:<4} {}",
        v.id,
        type_str(&v.ty)
    )
}

/// The body of the listing: the column header, the instructions and the variable table (everything
/// after the `DIFO` line).
pub fn listing_body(obj: &DifObject) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{:<3} {:<8}    INSTRUCTION", "OFF", "OPCODE");
    for (i, &w) in obj.text.iter().enumerate() {
        let _ = writeln!(out, "{i:02}: {w:08x}    {}", instr_text(obj, w));
    }
    if !obj.vartab.is_empty() {
        let _ = writeln!(
            out,
            "\n{:<16} {:<4} {:<3} {:<3} {:<4} TYPE",
            "NAME", "ID", "KND", "SCP", "FLAG"
        );
        for v in &obj.vartab {
            let _ = writeln!(out, "{}", var_line(obj, v));
        }
    }
    out.push('\n');
    out
}

/// The whole listing as `dtrace -S` prints it; `label` stands where DTrace prints the object's address.
pub fn disassemble(obj: &DifObject, label: &str) -> String {
    format!(
        "\nDIFO {label} returns {}\n{}",
        type_str(&obj.rtype),
        listing_body(obj)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;

    #[test]
    fn listing_matches_dtrace_layout() {
        let o = assemble(
            ".var x 0x500 scl glb r/w int 8\nsetx 0x2a, %r1\nstgs %r1, x\nsets \"abc\", %r2\nflushts\npushtr string, %r0, %r2\ncall strlen, %r3\nldx [%r2], %r4\nstb %r4, [%r2]\nbe 9\nret %r1\n",
        )
        .unwrap();
        let want = "\nDIFO 0x1 returns D type (integer) (size 8)\n\
OFF OPCODE      INSTRUCTION\n\
00: 25000001    setx DT_INTEGER[0], %r1\t\t! 0x2a\n\
01: 2a050001    stgs %r1, DT_VAR(1280)\t\t! DT_VAR(1280) = \"x\"\n\
02: 26000202    sets DT_STRING[2], %r2\t\t! \"abc\"\n\
03: 33000000    flushts\n\
04: 30010002    pushtr DT_TYPE(1), %r0, %r2\t! DT_TYPE(1) = string\n\
05: 2f000c03    call DIF_SUBR(12), %r3\t\t! strlen\n\
06: 22020004    ldx  [%r2], %r4\n\
07: 3c040002    stb  %r4, [%r2]\n\
08: 12000009    be   9\n\
09: 23000001    ret  %r1\n\
\n\
NAME             ID   KND SCP FLAG TYPE\n\
x                500  scl glb r/w  D type (integer) (size 8)\n\n";
        assert_eq!(disassemble(&o, "0x1"), want);
    }

    #[test]
    fn types_print_like_dtrace() {
        assert_eq!(
            type_str(&DifType::string(256)),
            "string (unknown) by ref (size 256)"
        );
        let t = DifType {
            kind: DIF_TYPE_CTF,
            ckind: ctf_kind::STRUCT,
            flags: DIF_TF_BYUREF,
            size: 24,
        };
        assert_eq!(type_str(&t), "D type (struct) by user ref (size 24)");
    }

    #[test]
    fn bad_words_still_print() {
        let o = DifObject {
            text: vec![0xff00_0000, 0x2500_0901, 0x2600_0902],
            ..Default::default()
        };
        let l = listing_body(&o);
        assert!(l.contains("invalid opcode 255"));
        assert!(l.contains("setx DT_INTEGER[9], %r1\n"));
    }
}

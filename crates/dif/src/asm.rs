//! The text assembler: DIF assembly (the syntax the disassembler prints) to a [`DifObject`].
//!
//! One instruction per line, `mnemonic operands`, optionally preceded by a listing's `NN: xxxxxxxx`
//! prefix and followed by a `! comment`. Operands are `%rN`, `[%rN]`, branch targets (instruction
//! numbers or `label`s defined by `label:` lines), and table references written either as DTrace prints
//! them (`DT_INTEGER[n]`, `DT_STRING[n]`, `DT_VAR(n)`, `DIF_SUBR(n)`, `DT_TYPE(n)`, `DT_XLREF[n]`) or
//! by value: `setx 42, %r1` and `sets "text", %r1` add table entries, variables and subroutines may be
//! named (`ldgs pid, %r1`, `call strjoin, %r1`). A listing's `! 0x2a` and `! "text"` comments after
//! `setx DT_INTEGER[n]` / `sets DT_STRING[n]` fill the tables, so `dtrace -S` listings re-assemble.
//!
//! Directives: `.rtype int N | string [N] | ref N | uref N` sets the return type;
//! `.var NAME ID arr|scl glb|tls|loc [r|w|r/w] int N | string [N] | ref N` adds a variable-table entry
//! (the name can then be used as an operand).

use std::collections::HashMap;

use crate::instr::Instr;
use crate::object::{
    ctf_kind, DifObject, DifType, VarEntry, DIFV_F_MOD, DIFV_F_REF, DIFV_KIND_ARRAY,
    DIFV_KIND_SCALAR, DIFV_SCOPE_GLOBAL, DIFV_SCOPE_LOCAL, DIFV_SCOPE_THREAD, DIF_TF_BYREF,
    DIF_TF_BYUREF, DIF_TYPE_CTF,
};
use crate::opcode::Opcode;
use crate::subr::Subr;
use crate::vars;

/// An assembly error with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct AsmError {
    /// Line number (1-based).
    pub line: usize,
    /// What is wrong.
    pub msg: String,
}

struct Asm {
    obj: DifObject,
    labels: HashMap<String, u32>,
    vars: HashMap<String, u32>,
    strs: HashMap<Vec<u8>, u32>,
}

fn strip_comment(line: &str) -> (&str, Option<&str>) {
    // A '!' outside a string literal starts the comment.
    let mut in_str = false;
    let mut esc = false;
    for (i, c) in line.char_indices() {
        match c {
            '\\' if in_str => esc = !esc,
            '"' if !esc => in_str = !in_str,
            '!' if !in_str => return (&line[..i], Some(line[i + 1..].trim())),
            _ => esc = false,
        }
        if c != '\\' {
            esc = false;
        }
    }
    (line, None)
}

fn strip_listing_prefix(line: &str) -> &str {
    // "07: 23000001    ret %r1"
    let t = line.trim_start();
    if let Some((off, rest)) = t.split_once(':') {
        if !off.is_empty() && off.chars().all(|c| c.is_ascii_digit()) {
            let rest = rest.trim_start();
            if let Some((word, after)) = rest.split_once(char::is_whitespace) {
                if word.len() == 8 && word.chars().all(|c| c.is_ascii_hexdigit()) {
                    return after;
                }
            }
        }
    }
    line
}

fn parse_int(s: &str) -> Option<u64> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else {
        s.parse::<u64>().ok()?
    };
    Some(if neg { v.wrapping_neg() } else { v })
}

fn parse_str_lit(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = Vec::new();
    let mut it = inner.bytes();
    while let Some(c) = it.next() {
        if c == b'\\' {
            match it.next()? {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'0' => return None,
                o => out.push(o),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Text inside `PREFIX(...)` or `PREFIX[...]`.
fn bracketed<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let r = s.trim().strip_prefix(prefix)?;
    r.strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .or_else(|| r.strip_prefix('[').and_then(|r| r.strip_suffix(']')))
}

fn parse_type(words: &[&str]) -> Result<DifType, String> {
    let size = |i: usize| -> Result<u32, String> {
        words
            .get(i)
            .and_then(|w| parse_int(w))
            .map(|v| v as u32)
            .ok_or_else(|| format!("missing or bad size in type {:?}", words.join(" ")))
    };
    match words.first().copied() {
        Some("int") => Ok(DifType::integer(size(1)?)),
        Some("string") => Ok(DifType::string(if words.len() > 1 {
            size(1)?
        } else {
            256
        })),
        Some("ref") | Some("uref") => Ok(DifType {
            kind: DIF_TYPE_CTF,
            ckind: ctf_kind::STRUCT,
            flags: if words[0] == "ref" {
                DIF_TF_BYREF
            } else {
                DIF_TF_BYUREF
            },
            size: size(1)?,
        }),
        _ => Err(format!("unknown type {:?}", words.join(" "))),
    }
}

impl Asm {
    fn intern(&mut self, s: &[u8]) -> u32 {
        if let Some(&o) = self.strs.get(s) {
            return o;
        }
        let off = self.obj.strtab.len() as u32;
        self.obj.strtab.extend_from_slice(s);
        self.obj.strtab.push(0);
        self.strs.insert(s.to_vec(), off);
        off
    }

    fn place_str(&mut self, off: usize, s: &[u8]) {
        let end = off + s.len() + 1;
        if self.obj.strtab.len() < end {
            self.obj.strtab.resize(end, 0);
        }
        self.obj.strtab[off..off + s.len()].copy_from_slice(s);
        self.obj.strtab[off + s.len()] = 0;
        self.strs.entry(s.to_vec()).or_insert(off as u32);
    }

    fn reg(&self, s: &str) -> Result<u8, String> {
        let s = s.trim();
        s.strip_prefix("%r")
            .and_then(|n| n.parse::<u8>().ok())
            .ok_or_else(|| format!("expected a register, found {s:?}"))
    }

    fn mem_reg(&self, s: &str) -> Result<u8, String> {
        let s = s.trim();
        let inner = s
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or_else(|| format!("expected [%rN], found {s:?}"))?;
        self.reg(inner)
    }

    fn var(&self, s: &str) -> Result<u32, String> {
        let s = s.trim();
        if let Some(n) = bracketed(s, "DT_VAR") {
            return parse_int(n)
                .map(|v| v as u32)
                .ok_or_else(|| format!("bad variable {s:?}"));
        }
        if let Some(&id) = self.vars.get(s) {
            return Ok(id);
        }
        vars::builtin_id(s)
            .or_else(|| parse_int(s).map(|v| v as u32))
            .ok_or_else(|| format!("unknown variable {s:?}"))
    }

    fn small(&self, s: &str, prefix: &str, what: &str) -> Result<u32, String> {
        let s = s.trim();
        let inner = bracketed(s, prefix).unwrap_or(s);
        parse_int(inner)
            .filter(|&v| v <= 0xffff)
            .map(|v| v as u32)
            .ok_or_else(|| format!("bad {what} {s:?}"))
    }

    fn directive(&mut self, words: &[&str]) -> Result<(), String> {
        match words[0] {
            ".rtype" => {
                self.obj.rtype = parse_type(&words[1..])?;
                Ok(())
            }
            ".var" => {
                if words.len() < 6 {
                    return Err(".var NAME ID KIND SCOPE [FLAGS] TYPE".into());
                }
                let name = words[1];
                let id = parse_int(words[2]).ok_or("bad variable id")? as u32;
                let kind = match words[3] {
                    "arr" => DIFV_KIND_ARRAY,
                    "scl" => DIFV_KIND_SCALAR,
                    k => return Err(format!("bad variable kind {k:?}")),
                };
                let scope = match words[4] {
                    "glb" => DIFV_SCOPE_GLOBAL,
                    "tls" => DIFV_SCOPE_THREAD,
                    "loc" => DIFV_SCOPE_LOCAL,
                    s => return Err(format!("bad variable scope {s:?}")),
                };
                let (flags, rest) = match words[5] {
                    "r" => (DIFV_F_REF, &words[6..]),
                    "w" => (DIFV_F_MOD, &words[6..]),
                    "r/w" | "rw" => (DIFV_F_REF | DIFV_F_MOD, &words[6..]),
                    _ => (DIFV_F_REF | DIFV_F_MOD, &words[5..]),
                };
                let ty = parse_type(rest)?;
                let name_off = self.intern(name.as_bytes());
                self.vars.insert(name.to_string(), id);
                self.obj.vartab.push(VarEntry {
                    name: name_off,
                    id,
                    kind,
                    scope,
                    flags,
                    ty,
                });
                Ok(())
            }
            d => Err(format!("unknown directive {d}")),
        }
    }

    fn instr(&mut self, text: &str, comment: Option<&str>) -> Result<Instr, String> {
        use Opcode::*;
        let text = text.trim();
        let (mn, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let op = Opcode::from_mnemonic(mn).ok_or_else(|| format!("unknown mnemonic {mn:?}"))?;
        let ops: Vec<&str> = if rest.trim().is_empty() {
            Vec::new()
        } else {
            split_operands(rest)
        };
        let want = |n: usize| -> Result<(), String> {
            if ops.len() == n {
                Ok(())
            } else {
                Err(format!("{mn} takes {n} operands, found {}", ops.len()))
            }
        };
        Ok(match op {
            Or | Xor | And | Sll | Srl | Sra | Sub | Add | Mul | Sdiv | Udiv | Srem | Urem => {
                want(3)?;
                Instr::Alu {
                    op,
                    r1: self.reg(ops[0])?,
                    r2: self.reg(ops[1])?,
                    rd: self.reg(ops[2])?,
                }
            }
            Copys => {
                want(3)?;
                Instr::Copys {
                    r1: self.reg(ops[0])?,
                    r2: self.reg(ops[1])?,
                    rd: self.reg(ops[2])?,
                }
            }
            Not | Mov | Allocs => {
                want(2)?;
                let (r1, rd) = (self.reg(ops[0])?, self.reg(ops[1])?);
                match op {
                    Not => Instr::Not { r1, rd },
                    Mov => Instr::Mov { r1, rd },
                    _ => Instr::Allocs { r1, rd },
                }
            }
            Cmp | Scmp => {
                want(2)?;
                let (r1, r2) = (self.reg(ops[0])?, self.reg(ops[1])?);
                if op == Cmp {
                    Instr::Cmp { r1, r2 }
                } else {
                    Instr::Scmp { r1, r2 }
                }
            }
            Tst => {
                want(1)?;
                Instr::Tst {
                    r1: self.reg(ops[0])?,
                }
            }
            Ba | Be | Bne | Bg | Bgu | Bge | Bgeu | Bl | Blu | Ble | Bleu => {
                want(1)?;
                let t = ops[0].trim();
                let label = match self.labels.get(t) {
                    Some(&l) => l,
                    None => parse_int(t)
                        .filter(|&v| v <= 0x00ff_ffff)
                        .ok_or_else(|| format!("unknown label {t:?}"))?
                        as u32,
                };
                Instr::Branch { op, label }
            }
            Ldsb | Ldsh | Ldsw | Ldub | Lduh | Lduw | Ldx | Uldsb | Uldsh | Uldsw | Uldub
            | Ulduh | Ulduw | Uldx | Rldsb | Rldsh | Rldsw | Rldub | Rlduh | Rlduw | Rldx => {
                want(2)?;
                Instr::Load {
                    op,
                    r1: self.mem_reg(ops[0])?,
                    rd: self.reg(ops[1])?,
                }
            }
            Stb | Sth | Stw | Stx => {
                want(2)?;
                Instr::Store {
                    op,
                    r1: self.reg(ops[0])?,
                    rd: self.mem_reg(ops[1])?,
                }
            }
            Ret => {
                want(1)?;
                Instr::Ret {
                    rd: self.reg(ops[0])?,
                }
            }
            Nop | Popts | Flushts => {
                want(0)?;
                match op {
                    Nop => Instr::Nop,
                    Popts => Instr::Popts,
                    _ => Instr::Flushts,
                }
            }
            Setx => {
                want(2)?;
                let rd = self.reg(ops[1])?;
                let idx = if let Some(n) = bracketed(ops[0], "DT_INTEGER") {
                    let n = parse_int(n)
                        .filter(|&v| v <= 0xffff)
                        .ok_or("bad DT_INTEGER")?;
                    if let Some(v) = comment.and_then(parse_int) {
                        let n = n as usize;
                        if self.obj.inttab.len() <= n {
                            self.obj.inttab.resize(n + 1, 0);
                        }
                        self.obj.inttab[n] = v;
                    }
                    n as u16
                } else {
                    let v = parse_int(ops[0]).ok_or_else(|| format!("bad integer {:?}", ops[0]))?;
                    match self.obj.inttab.iter().position(|&x| x == v) {
                        Some(p) => p as u16,
                        None => {
                            if self.obj.inttab.len() > 0xffff {
                                return Err("integer table full".into());
                            }
                            self.obj.inttab.push(v);
                            (self.obj.inttab.len() - 1) as u16
                        }
                    }
                };
                Instr::Setx { idx, rd }
            }
            Sets => {
                want(2)?;
                let rd = self.reg(ops[1])?;
                let idx = if let Some(n) = bracketed(ops[0], "DT_STRING") {
                    let n = parse_int(n)
                        .filter(|&v| v <= 0xffff)
                        .ok_or("bad DT_STRING")?;
                    if let Some(s) = comment.and_then(parse_str_lit) {
                        self.place_str(n as usize, &s);
                    }
                    n as u16
                } else {
                    let s = parse_str_lit(ops[0])
                        .ok_or_else(|| format!("bad string literal {:?}", ops[0]))?;
                    let off = self.intern(&s);
                    u16::try_from(off).map_err(|_| "string table too large")?
                };
                Instr::Sets { idx, rd }
            }
            Ldga | Ldta => {
                want(3)?;
                let var = self.var(ops[0])?;
                if var > 0xff {
                    return Err(format!("array variable {var} does not fit 8 bits"));
                }
                Instr::LoadArray {
                    op,
                    var: var as u8,
                    r2: self.reg(ops[1])?,
                    rd: self.reg(ops[2])?,
                }
            }
            Ldgs | Ldts | Ldls | Ldgaa | Ldtaa => {
                want(2)?;
                let var = self.var(ops[0])?;
                Instr::LoadVar {
                    op,
                    var: u16::try_from(var).map_err(|_| "variable id above 0xffff")?,
                    rd: self.reg(ops[1])?,
                }
            }
            Stgs | Stts | Stls | Stgaa | Sttaa => {
                want(2)?;
                let var = self.var(ops[1])?;
                Instr::StoreVar {
                    op,
                    var: u16::try_from(var).map_err(|_| "variable id above 0xffff")?,
                    rs: self.reg(ops[0])?,
                }
            }
            Call => {
                want(2)?;
                let t = ops[0].trim();
                let subr = match Subr::from_name(t) {
                    Some(s) => s as u16,
                    None => self.small(t, "DIF_SUBR", "subroutine")? as u16,
                };
                Instr::Call {
                    subr,
                    rd: self.reg(ops[1])?,
                }
            }
            Pushtr | Pushtv => {
                let ty = match ops.first().map(|s| s.trim()) {
                    Some("string") => 1,
                    Some("int") | Some("ctf") => 0,
                    Some(t) => self.small(t, "DT_TYPE", "type")?.min(0xff) as u8,
                    None => return Err(format!("{mn} needs a type")),
                };
                if op == Pushtr {
                    want(3)?;
                    Instr::Pushtr {
                        ty,
                        r2: self.reg(ops[1])?,
                        rs: self.reg(ops[2])?,
                    }
                } else {
                    // `pushtv type, %rs` or the listing's `pushtv DT_TYPE(0), %r0, %rs`.
                    let rs = self.reg(ops.last().copied().unwrap_or(""))?;
                    if ops.len() != 2 && ops.len() != 3 {
                        return Err("pushtv takes 2 or 3 operands".into());
                    }
                    Instr::Pushtv { ty, rs }
                }
            }
            Xlate | Xlarg => {
                want(2)?;
                Instr::Xlate {
                    op,
                    idx: self.small(ops[0], "DT_XLREF", "translator reference")? as u16,
                    rd: self.reg(ops[1])?,
                }
            }
        })
    }
}

/// Parses a type as the disassembler prints it (`D type (integer) (size 4)`,
/// `string (unknown) by ref (size 256)`).
fn parse_type_str(s: &str) -> Result<DifType, String> {
    let bad = || format!("bad type {s:?}");
    let (kind, rest) = if let Some(r) = s.strip_prefix("D type") {
        (DIF_TYPE_CTF, r)
    } else if let Some(r) = s.strip_prefix("string") {
        (crate::object::DIF_TYPE_STRING, r)
    } else {
        return Err(bad());
    };
    let rest = rest.trim();
    let (ck, rest) = rest
        .strip_prefix('(')
        .and_then(|r| r.split_once(')'))
        .ok_or_else(bad)?;
    let ckind = [
        "unknown", "integer", "float", "pointer", "array", "function", "struct", "union", "enum",
        "forward", "typedef", "volatile", "const", "restrict",
    ]
    .iter()
    .position(|&n| n == ck)
    .ok_or_else(bad)? as u8;
    let rest = rest.trim();
    let (flags, rest) = if let Some(r) = rest.strip_prefix("by user ref") {
        (DIF_TF_BYUREF, r)
    } else if let Some(r) = rest.strip_prefix("by ref") {
        (DIF_TF_BYREF, r)
    } else {
        (0, rest)
    };
    let size = rest
        .trim()
        .strip_prefix("(size ")
        .and_then(|r| r.strip_suffix(')'))
        .and_then(parse_int)
        .ok_or_else(bad)? as u32;
    Ok(DifType {
        kind,
        ckind,
        flags,
        size,
    })
}

impl Asm {
    /// A variable-table line of a listing: `name id kind scope [flags] type`.
    fn listing_var(&mut self, w: &[&str]) -> Result<(), String> {
        if w.len() < 5 {
            return Err("short variable-table line".into());
        }
        let id =
            u32::from_str_radix(w[1], 16).map_err(|_| format!("bad variable id {:?}", w[1]))?;
        let kind = match w[2] {
            "arr" => DIFV_KIND_ARRAY,
            "scl" => DIFV_KIND_SCALAR,
            k => k.parse().map_err(|_| format!("bad kind {k:?}"))?,
        };
        let scope = match w[3] {
            "glb" => DIFV_SCOPE_GLOBAL,
            "tls" => DIFV_SCOPE_THREAD,
            "loc" => DIFV_SCOPE_LOCAL,
            k => k.parse().map_err(|_| format!("bad scope {k:?}"))?,
        };
        let (flags, rest) = match w[4] {
            "r" => (DIFV_F_REF, &w[5..]),
            "w" => (DIFV_F_MOD, &w[5..]),
            "r/w" => (DIFV_F_REF | DIFV_F_MOD, &w[5..]),
            _ => (0, &w[4..]),
        };
        let ty = parse_type_str(&rest.join(" "))?;
        let name = self.intern(w[0].as_bytes());
        self.vars.insert(w[0].to_string(), id);
        self.obj.vartab.push(VarEntry {
            name,
            id,
            kind,
            scope,
            flags,
            ty,
        });
        Ok(())
    }
}

fn split_operands(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut in_str = false;
    let mut start = 0;
    let bytes = s.as_bytes();
    for (i, &c) in bytes.iter().enumerate() {
        match c {
            b'"' if i == 0 || bytes[i - 1] != b'\\' => in_str = !in_str,
            b'(' | b'[' if !in_str => depth += 1,
            b')' | b']' if !in_str => depth -= 1,
            b',' if !in_str && depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(s[start..].trim());
    out
}

/// Assembles DIF assembly text into an object (not verified: run [`crate::verify::verify`] on it).
pub fn assemble(src: &str) -> Result<DifObject, AsmError> {
    let mut a = Asm {
        obj: DifObject {
            rtype: DifType::integer(8),
            ..DifObject::default()
        },
        labels: HashMap::new(),
        vars: HashMap::new(),
        strs: HashMap::new(),
    };
    // Pass 1: labels and directives.
    let mut body = Vec::new();
    let mut n = 0u32;
    let mut in_vartab = false;
    for (lineno, raw) in src.lines().enumerate() {
        let line = lineno + 1;
        let words: Vec<&str> = raw.split_whitespace().collect();
        if words.first() == Some(&"DIFO") && words.get(2) == Some(&"returns") {
            a.obj.rtype =
                parse_type_str(&words[3..].join(" ")).map_err(|msg| AsmError { line, msg })?;
            continue;
        }
        if words.first() == Some(&"OFF") && words.get(1) == Some(&"OPCODE") {
            continue;
        }
        if words.first() == Some(&"NAME") && words.get(1) == Some(&"ID") {
            in_vartab = true;
            continue;
        }
        if in_vartab {
            if !words.is_empty() {
                a.listing_var(&words)
                    .map_err(|msg| AsmError { line, msg })?;
            }
            continue;
        }
        let (code, comment) = strip_comment(strip_listing_prefix(raw));
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        if code.starts_with('.') {
            let words: Vec<&str> = code.split_whitespace().collect();
            a.directive(&words).map_err(|msg| AsmError { line, msg })?;
            continue;
        }
        if let Some(l) = code.strip_suffix(':') {
            if !l.is_empty()
                && l.chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.')
            {
                if a.labels.insert(l.to_string(), n).is_some() {
                    return Err(AsmError {
                        line,
                        msg: format!("label {l:?} defined twice"),
                    });
                }
                continue;
            }
        }
        body.push((line, code.to_string(), comment.map(str::to_string)));
        n += 1;
    }
    for (line, code, comment) in body {
        let i = a
            .instr(&code, comment.as_deref())
            .map_err(|msg| AsmError { line, msg })?;
        a.obj.text.push(i.encode());
    }
    Ok(a.obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::disasm::listing_body;

    #[test]
    fn assembles_by_value_and_labels() {
        let o = assemble(
            ".var x 0x500 scl glb int 8\nsetx 7, %r1\nstgs %r1, x\nldgs x, %r2\ncmp %r1, %r2\nbe out\nsets \"hi\", %r3\nout:\nret %r2\n",
        )
        .unwrap();
        assert_eq!(o.inttab, vec![7]);
        assert_eq!(o.string_at(o.vartab[0].name as usize), Some(&b"x"[..]));
        assert_eq!(o.text.len(), 7);
        assert_eq!(o.text[4], 0x1200_0006);
    }

    #[test]
    fn listing_round_trips() {
        let src = ".var s 0x500 scl glb r/w string 256\n.rtype string 256\nsets \"abc\", %r1\nsetx 0x2a, %r2\nstgs %r1, s\npushtv int, %r2\npushtr string, %r0, %r1\ncall strjoin, %r3\nldgs s, %r4\nret %r3\n";
        let o = assemble(src).unwrap();
        let listing = crate::disasm::disassemble(&o, "0x1234");
        let again = assemble(&listing).unwrap();
        assert_eq!(again.text, o.text);
        assert_eq!(again.inttab, o.inttab);
        assert_eq!(again.vartab.len(), 1);
        assert_eq!(again.vartab[0].ty, o.vartab[0].ty);
        assert_eq!(again.rtype, o.rtype);
        assert_eq!(listing_body(&again), listing_body(&o));
    }

    #[test]
    fn errors_name_the_line() {
        let e = assemble("nop\nfrob %r1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(assemble("add %r1, %r2\n").is_err());
        assert!(assemble("ba nowhere\n").is_err());
        assert!(assemble("x:\nx:\n").is_err());
        assert!(assemble("sets \"abc, %r1\n").is_err());
    }
}

//! Opcode descriptions: the `oplist` XML files (`oplist.dtd`) that name the instructions dyntrace counts,
//! and the matching of instruction bytes against them.
//!
//! Two ways of matching live here. The original files describe each op by a bit pattern over the
//! instruction bytes; the most specific matching entry wins and a matching prefix entry is skipped and
//! remembered. Our own x86-64 file also names each op's decoder `code` (an iced-x86 `Code`), which is used
//! first when present. On x86-64 REX bytes (0x40-0x4F) are always prefixes: a file that declares no REX
//! prefix gets one appended, and VEX/EVEX/XOP instructions, which IA-32 patterns would misread as
//! LES/LDS/BOUND/POP, count as unknown under a bit-pattern file.

use crate::bitmask::{byte_bits, Bitmask};
use iced_x86::{Code, EncodingKind};
use std::collections::HashMap;

/// An instruction prefix the file declares.
#[derive(Debug, Clone)]
pub struct PrefixDesc {
    /// The pattern.
    pub bitmask: Bitmask,
    /// The pattern as written in the file.
    pub bitmask_text: String,
    /// What it is (`LOCK`, `operand size`, ...).
    pub detail: String,
}

/// An instruction the file declares.
#[derive(Debug, Clone)]
pub struct OpDesc {
    /// The pattern as written in the file.
    pub bitmask_text: String,
    /// The parsed pattern (used for matching when no decoder code applies).
    pub bitmask: Bitmask,
    /// Mnemonic.
    pub mnemonic: String,
    /// Which form of the instruction.
    pub detail: Option<String>,
    /// The `conditional` attribute, kept as read.
    pub conditional: Option<String>,
    /// The decoder code this op stands for (our own files only).
    pub code: Option<Code>,
}

/// Index of an op in [`OpList::ops`], or an unknown first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpId {
    /// A described op.
    Known(u32),
    /// Bytes no entry describes, keyed by the first byte not matched.
    Unknown(u8),
}

/// What is counted: an op and the set of prefixes (bit `i` = prefix `i` of the file) seen on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpKey {
    /// The op.
    pub op: OpId,
    /// Prefixes seen, as a bit set over [`OpList::prefixes`].
    pub prefixes: u32,
}

#[derive(Debug, Clone, Copy)]
enum Entry {
    Prefix(u8),
    Op(u32),
}

/// A loaded opcode description file.
#[derive(Debug, Clone)]
pub struct OpList {
    /// Declared prefixes, in file order (plus an appended REX prefix when the file has none).
    pub prefixes: Vec<PrefixDesc>,
    /// Declared ops, in file order.
    pub ops: Vec<OpDesc>,
    by_first_byte: Vec<Vec<(Bitmask, Entry)>>,
    prefix_by_byte: Vec<Option<u8>>,
    by_code: HashMap<Code, u32>,
    rex_prefix: u8,
}

/// Longest instruction on x86.
pub const MAX_INSN_LEN: usize = 15;

/// Most prefixes a file may declare (they are counted in a 32-bit set).
pub const MAX_PREFIXES: usize = 31;

fn err(path: &str, reason: impl Into<String>) -> crate::Error {
    crate::Error::OpcodeFile {
        path: path.to_string(),
        reason: reason.into(),
    }
}

/// A node's line number, computed only when an error message shows it.
struct LazyLine<'a, 'input>(&'a roxmltree::Document<'input>, roxmltree::Node<'a, 'input>);

impl std::fmt::Display for LazyLine<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.text_pos_at(self.1.range().start).row)
    }
}

fn code_names() -> HashMap<String, Code> {
    Code::values().map(|c| (format!("{c:?}"), c)).collect()
}

impl OpList {
    /// Parses an opcode description file; `path` only names it in errors.
    pub fn parse(text: &str, path: &str) -> crate::Result<Self> {
        let doc = roxmltree::Document::parse_with_options(
            text,
            roxmltree::ParsingOptions {
                allow_dtd: true,
                nodes_limit: 1 << 22,
            },
        )
        .map_err(|e| err(path, e.to_string()))?;
        let root = doc.root_element();
        if root.tag_name().name() != "oplist" {
            return Err(err(
                path,
                format!("root element is <{}>, not <oplist>", root.tag_name().name()),
            ));
        }
        let mut prefixes = Vec::new();
        let mut ops = Vec::new();
        let mut names: Option<HashMap<String, Code>> = None;
        for node in root.children().filter(|n| n.is_element()) {
            let line = LazyLine(&doc, node);
            let attr = |name: &str| -> crate::Result<String> {
                node.attribute(name).map(str::to_string).ok_or_else(|| {
                    err(
                        path,
                        format!(
                            "line {line}: <{}> lacks the {name} attribute",
                            node.tag_name().name()
                        ),
                    )
                })
            };
            let pattern = |text: &str| {
                Bitmask::parse(text).map_err(|e| err(path, format!("line {line}: {e}")))
            };
            match node.tag_name().name() {
                "prefix" => {
                    if !ops.is_empty() {
                        return Err(err(path, format!("line {line}: <prefix> after an <op>")));
                    }
                    if prefixes.len() >= MAX_PREFIXES {
                        return Err(err(
                            path,
                            format!("line {line}: more than {MAX_PREFIXES} prefixes"),
                        ));
                    }
                    let bitmask_text = attr("bitmask")?;
                    let bitmask = pattern(&bitmask_text)?;
                    if bitmask.len % 8 != 0 {
                        return Err(err(
                            path,
                            format!("line {line}: prefix bitmask is not whole bytes"),
                        ));
                    }
                    prefixes.push(PrefixDesc {
                        bitmask,
                        bitmask_text,
                        detail: attr("detail")?,
                    });
                }
                "op" => {
                    let bitmask_text = attr("bitmask")?;
                    let bitmask = pattern(&bitmask_text)?;
                    let code = match node.attribute("code") {
                        None => None,
                        Some(name) => {
                            let table = names.get_or_insert_with(code_names);
                            Some(*table.get(name).ok_or_else(|| {
                                err(
                                    path,
                                    format!("line {line}: unknown decoder code \"{name}\""),
                                )
                            })?)
                        }
                    };
                    let mut described = 0;
                    for child in node.children().filter(|n| n.is_element()) {
                        let cl = LazyLine(&doc, child);
                        match child.tag_name().name() {
                            "arg" => {
                                if described > 0 {
                                    return Err(err(
                                        path,
                                        format!("line {cl}: <arg> after <description>"),
                                    ));
                                }
                                for a in ["direction", "type"] {
                                    if child.attribute(a).is_none() {
                                        return Err(err(
                                            path,
                                            format!("line {cl}: <arg> lacks the {a} attribute"),
                                        ));
                                    }
                                }
                            }
                            "description" => described += 1,
                            other => {
                                return Err(err(
                                    path,
                                    format!("line {cl}: unexpected <{other}> in <op>"),
                                ))
                            }
                        }
                    }
                    if described != 1 {
                        return Err(err(
                            path,
                            format!("line {line}: <op> must hold exactly one <description>"),
                        ));
                    }
                    ops.push(OpDesc {
                        bitmask_text,
                        bitmask,
                        mnemonic: attr("mnemonic")?,
                        detail: node.attribute("detail").map(str::to_string),
                        conditional: node.attribute("conditional").map(str::to_string),
                        code,
                    });
                }
                other => {
                    return Err(err(
                        path,
                        format!("line {line}: unexpected element <{other}>"),
                    ));
                }
            }
        }
        if ops.is_empty() {
            return Err(err(path, "no <op> entries"));
        }
        Ok(Self::build(prefixes, ops))
    }

    fn build(mut prefixes: Vec<PrefixDesc>, ops: Vec<OpDesc>) -> Self {
        let rex = prefixes.iter().position(|p| {
            p.bitmask.len == 8 && (0x40..=0x4f).all(|b| p.bitmask.first_byte_can_be(b))
        });
        let rex_prefix = match rex {
            Some(i) => i as u8,
            None => {
                prefixes.push(PrefixDesc {
                    bitmask: Bitmask {
                        value: 0x4000_0000,
                        care: 0xf000_0000,
                        len: 8,
                    },
                    bitmask_text: "0100xxxx".into(),
                    detail: "REX (x86-64; added by dyntrace)".into(),
                });
                (prefixes.len() - 1) as u8
            }
        };
        let mut by_first_byte: Vec<Vec<(Bitmask, Entry)>> = vec![Vec::new(); 256];
        let mut prefix_by_byte = vec![None; 256];
        for (b, list) in by_first_byte.iter_mut().enumerate() {
            let b = b as u8;
            for (i, p) in prefixes.iter().enumerate() {
                if i as u8 != rex_prefix && p.bitmask.first_byte_can_be(b) {
                    list.push((p.bitmask, Entry::Prefix(i as u8)));
                    if p.bitmask.len == 8 && prefix_by_byte[b as usize].is_none() {
                        prefix_by_byte[b as usize] = Some(i as u8);
                    }
                }
            }
            for (i, o) in ops.iter().enumerate() {
                if o.bitmask.first_byte_can_be(b) {
                    list.push((o.bitmask, Entry::Op(i as u32)));
                }
            }
            // Most specific first; the sort is stable so file order breaks ties.
            list.sort_by_key(|e| std::cmp::Reverse((e.0.specificity(), e.0.len)));
        }
        let mut by_code = HashMap::new();
        for (i, o) in ops.iter().enumerate() {
            if let Some(c) = o.code {
                by_code.entry(c).or_insert(i as u32);
            }
        }
        OpList {
            prefixes,
            ops,
            by_first_byte,
            prefix_by_byte,
            by_code,
            rex_prefix,
        }
    }

    /// Whether the ops carry decoder codes (our own files).
    pub fn is_decoder_keyed(&self) -> bool {
        !self.by_code.is_empty()
    }

    /// Names what `bytes` (an instruction already decoded as `insn` in a `bitness`-bit code segment) is.
    pub fn classify(&self, bytes: &[u8], insn: &iced_x86::Instruction, bitness: u32) -> OpKey {
        if let Some(&op) = self.by_code.get(&insn.code()) {
            return OpKey {
                op: OpId::Known(op),
                prefixes: self.scan_prefixes(bytes, bitness),
            };
        }
        let foreign = matches!(
            insn.encoding(),
            EncodingKind::VEX | EncodingKind::EVEX | EncodingKind::XOP | EncodingKind::MVEX
        );
        if bitness == 64 && foreign {
            return OpKey {
                op: OpId::Unknown(bytes.first().copied().unwrap_or(0)),
                prefixes: self.scan_prefixes(bytes, bitness),
            };
        }
        self.match_bits(bytes, bitness)
    }

    fn scan_prefixes(&self, bytes: &[u8], bitness: u32) -> u32 {
        let mut set = 0u32;
        for &b in bytes.iter().take(MAX_INSN_LEN) {
            if bitness == 64 && (0x40..=0x4f).contains(&b) {
                set |= 1 << self.rex_prefix;
            } else if let Some(p) = self.prefix_by_byte[b as usize] {
                set |= 1 << p;
            } else {
                break;
            }
        }
        set
    }

    /// Matches by bit patterns alone, as the original did.
    pub fn match_bits(&self, bytes: &[u8], bitness: u32) -> OpKey {
        let mut pos = 0usize;
        let mut prefixes = 0u32;
        while pos < bytes.len() && pos < MAX_INSN_LEN {
            let b = bytes[pos];
            if bitness == 64 && (0x40..=0x4f).contains(&b) {
                prefixes |= 1 << self.rex_prefix;
                pos += 1;
                continue;
            }
            let avail = (bytes.len() - pos).min(4);
            let mut word = 0u32;
            for (i, &x) in bytes[pos..pos + avail].iter().enumerate() {
                word |= (x as u32) << (24 - 8 * i);
            }
            let hit = self.by_first_byte[b as usize]
                .iter()
                .find(|(m, _)| m.matches(word, avail));
            match hit {
                Some((m, Entry::Prefix(i))) => {
                    prefixes |= 1 << i;
                    pos += m.byte_len();
                }
                Some((_, Entry::Op(i))) => {
                    return OpKey {
                        op: OpId::Known(*i),
                        prefixes,
                    }
                }
                None => break,
            }
        }
        OpKey {
            op: OpId::Unknown(bytes.get(pos).copied().unwrap_or(0)),
            prefixes,
        }
    }

    /// Output attributes of an op: bitmask, mnemonic, detail.
    pub fn describe(&self, op: OpId) -> (String, &str, Option<&str>) {
        match op {
            OpId::Known(i) => match self.ops.get(i as usize) {
                Some(o) => (o.bitmask_text.clone(), &o.mnemonic, o.detail.as_deref()),
                None => (String::new(), "(unknown)", None),
            },
            OpId::Unknown(b) => (byte_bits(b), "(unknown)", None),
        }
    }
}

/// Our own x86-64 description file, as shipped in `share/dyntrace/`.
pub const BUILTIN_OPLIST: &str = include_str!("../share/dyntrace/oplist-x86_64.xml");

/// Our own `oplist.dtd`.
pub const OPLIST_DTD: &str = include_str!("../share/dyntrace/oplist.dtd");

/// Our own `dyntrace.dtd`.
pub const DYNTRACE_DTD: &str = include_str!("../share/dyntrace/dyntrace.dtd");

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"<?xml version="1.0"?>
<!DOCTYPE oplist SYSTEM "oplist.dtd">
<oplist>
    <prefix bitmask="01100110" detail="operand size" />
    <prefix bitmask="11110000" detail="LOCK" />
    <op bitmask="0000000" mnemonic="ADD" detail="register to memory"><description>Add</description></op>
    <op bitmask="0000000x11" mnemonic="ADD" detail="register1 to register2"><description>Add</description></op>
    <op bitmask="10010000" mnemonic="NOP"><description>No operation</description></op>
    <op bitmask="01000reg" mnemonic="INC"><description>never on x86-64</description></op>
</oplist>"#;

    fn decode(bytes: &[u8]) -> iced_x86::Instruction {
        iced_x86::Decoder::new(64, bytes, 0).decode()
    }

    #[test]
    fn most_specific_match_wins_and_prefixes_are_skipped() {
        // "01000reg" is not a bitmask: the file must be rejected with a line number.
        assert!(matches!(
            OpList::parse(SMALL, "t"),
            Err(crate::Error::OpcodeFile { .. })
        ));
        let good = SMALL.replace("01000reg", "01000xxx");
        let l = OpList::parse(&good, "t").unwrap();
        assert_eq!(l.prefixes.len(), 3, "REX appended");
        let b = [0x66, 0x01, 0xc8];
        let k = l.classify(&b, &decode(&b), 64);
        assert_eq!(
            k,
            OpKey {
                op: OpId::Known(1),
                prefixes: 1
            }
        );
        let b = [0xf0, 0x01, 0x08];
        assert_eq!(
            l.classify(&b, &decode(&b), 64),
            OpKey {
                op: OpId::Known(0),
                prefixes: 2
            }
        );
        // REX.W add: REX is a prefix on x86-64, never INC.
        let b = [0x48, 0x01, 0xc8];
        assert_eq!(
            l.classify(&b, &decode(&b), 64),
            OpKey {
                op: OpId::Known(1),
                prefixes: 4
            }
        );
        let b = [0x41];
        assert_eq!(l.match_bits(&b, 32).op, OpId::Known(3));
        let b = [0x0f, 0x05];
        assert_eq!(l.classify(&b, &decode(&b), 64).op, OpId::Unknown(0x0f));
        // VEX under a bit-pattern file is unknown, not LES.
        let b = [0xc5, 0xf9, 0x6f, 0xc1];
        assert_eq!(l.classify(&b, &decode(&b), 64).op, OpId::Unknown(0xc5));
    }

    #[test]
    fn malformed_files_are_errors() {
        for bad in [
            "",
            "<notoplist/>",
            "<oplist></oplist>",
            "<oplist><op mnemonic=\"X\"><description/></op></oplist>",
            "<oplist><op bitmask=\"1\" mnemonic=\"X\"></op></oplist>",
            "<oplist><op bitmask=\"1\" mnemonic=\"X\"><description/></op><prefix bitmask=\"11110000\" detail=\"d\"/></oplist>",
            "<oplist><op bitmask=\"1\" mnemonic=\"X\" code=\"NoSuchCode\"><description/></op></oplist>",
            "<oplist><prefix bitmask=\"1111\" detail=\"d\"/><op bitmask=\"1\" mnemonic=\"X\"><description/></op></oplist>",
            "<oplist><op bitmask=\"1\" mnemonic=\"X\"><description/><bogus/></op></oplist>",
            "<oplist><op bitmask=\"1\"",
        ] {
            assert!(
                matches!(OpList::parse(bad, "t"), Err(crate::Error::OpcodeFile { .. })),
                "accepted {bad:?}"
            );
        }
    }

    #[test]
    fn builtin_file_is_decoder_keyed() {
        let l = OpList::parse(BUILTIN_OPLIST, "builtin").unwrap();
        assert!(l.is_decoder_keyed());
        let b = [0x48, 0x01, 0xc8];
        let k = l.classify(&b, &decode(&b), 64);
        let (_, mn, _) = l.describe(k.op);
        assert_eq!(mn, "ADD");
        assert_ne!(k.prefixes, 0);
        let b = [0x0f, 0x05];
        assert_eq!(l.describe(l.classify(&b, &decode(&b), 64).op).1, "SYSCALL");
    }
}

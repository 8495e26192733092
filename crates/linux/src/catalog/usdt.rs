//! USDT probes from SystemTap `.note.stapsdt` notes (`<sys/sdt.h>`): each note of an object names a
//! provider, a probe, the probe site's address, an optional semaphore and the arguments as
//! assembler operands (`-4@%eax`, `8@16(%rbp)`, `$5`). A note becomes the probe
//! `<provider><PID>:<module>:<function>:<name>` with `__` in the name written `-`, as DTrace names
//! USDT probes; its arguments are read from the user registers and memory at the site, and its
//! semaphore is raised by the kernel while the uprobe is attached (`ref_ctr_offset`).
//!
//! Notes are outside bytes: [`parse_notes`] and [`parse_arg`] return errors, never panic.
//!
//! [`read_sites`] also reads the USDT providers a `.SUNW_dof` section describes (`dtrace -G`,
//! decoded by [`super::dof_usdt`]), so that both kinds of USDT probe are one [`Site`] list that the
//! pid catalog turns into uprobes.

use super::pid::regs;
use crate::capture::ArgSource;
use crate::error::{LinuxError, Result};
use object::read::ReadCache;
use object::{Object, ObjectSection, ObjectSegment};
use std::fs::File;

/// `NT_STAPSDT`.
const NT_STAPSDT: u32 = 3;

/// One decoded note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Provider (`python`).
    pub provider: String,
    /// Probe name as written in the note (`gc__start`).
    pub name: String,
    /// Link-time address of the probe site.
    pub pc: u64,
    /// Link-time address of `.stapsdt.base` the note was made against.
    pub base: u64,
    /// Link-time address of the semaphore (0: none).
    pub semaphore: u64,
    /// The argument operands, space-separated.
    pub args: String,
}

fn bad(reason: impl Into<String>) -> LinuxError {
    LinuxError::BadFile {
        path: ".note.stapsdt".into(),
        reason: reason.into(),
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A NUL-terminated string of `b` from `at`, and the offset after its NUL.
fn cstr(b: &[u8], at: usize) -> Option<(String, usize)> {
    let rest = b.get(at..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some((String::from_utf8_lossy(&rest[..n]).into_owned(), at + n + 1))
}

/// Decodes the notes of a 64-bit little-endian `.note.stapsdt` section. Notes of other owners
/// or types are skipped; a truncated or malformed note is an error.
pub fn parse_notes(data: &[u8]) -> Result<Vec<Note>> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let (Some(namesz), Some(descsz), Some(typ)) =
            (u32_at(data, at), u32_at(data, at + 4), u32_at(data, at + 8))
        else {
            return Err(bad(format!("truncated note header at {at}")));
        };
        let name_at = at + 12;
        let desc_at = name_at
            .checked_add((namesz as usize).next_multiple_of(4))
            .ok_or_else(|| bad("note name too long"))?;
        let next = desc_at
            .checked_add((descsz as usize).next_multiple_of(4))
            .ok_or_else(|| bad("note too long"))?;
        let (Some(owner), Some(desc)) = (
            data.get(name_at..name_at + namesz as usize),
            data.get(desc_at..desc_at + descsz as usize),
        ) else {
            return Err(bad(format!("truncated note at {at}")));
        };
        at = next;
        if typ != NT_STAPSDT || owner != b"stapsdt\0" {
            continue;
        }
        let (Some(pc), Some(base), Some(semaphore)) =
            (u64_at(desc, 0), u64_at(desc, 8), u64_at(desc, 16))
        else {
            return Err(bad("stapsdt note shorter than its three addresses"));
        };
        let (provider, p) = cstr(desc, 24).ok_or_else(|| bad("unterminated provider name"))?;
        let (name, p) = cstr(desc, p).ok_or_else(|| bad("unterminated probe name"))?;
        let (args, _) = cstr(desc, p).ok_or_else(|| bad("unterminated argument list"))?;
        out.push(Note {
            provider,
            name,
            pc,
            base,
            semaphore,
            args,
        });
    }
    Ok(out)
}

/// The `struct pt_regs` offset of an x86-64 register named in an operand (any width).
fn register(name: &str) -> Option<u16> {
    use regs::*;
    Some(match name {
        "rax" | "eax" | "ax" | "al" => RAX,
        "rbx" | "ebx" | "bx" | "bl" => RBX,
        "rcx" | "ecx" | "cx" | "cl" => RCX,
        "rdx" | "edx" | "dx" | "dl" => RDX,
        "rsi" | "esi" | "si" | "sil" => RSI,
        "rdi" | "edi" | "di" | "dil" => RDI,
        "rbp" | "ebp" | "bp" | "bpl" => RBP,
        "rsp" | "esp" | "sp" | "spl" => RSP,
        "rip" => RIP,
        _ => {
            let rest = name.strip_prefix('r')?;
            let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
            let suffix = &rest[digits.len()..];
            if !matches!(suffix, "" | "d" | "w" | "b") {
                return None;
            }
            match digits.parse::<u8>().ok()? {
                8 => R8,
                9 => R9,
                10 => R10,
                11 => R11,
                12 => R12,
                13 => R13,
                14 => R14,
                15 => R15,
                _ => return None,
            }
        }
    })
}

/// Decodes one argument operand (`-4@%eax`, `8@16(%rbp)`, `4@$5`, `8@(%rdi)`) into where the
/// capture reads it. Operands with an index register or a symbol are not yet supported.
pub fn parse_arg(spec: &str) -> Result<ArgSource> {
    let unsupported = || LinuxError::NotYetSupported(format!("USDT argument operand {spec:?}"));
    let (size, operand) = match spec.split_once('@') {
        Some((s, o)) => (s.parse::<i8>().map_err(|_| unsupported())?, o),
        None => (8, spec),
    };
    let signed = size < 0;
    let size = size.unsigned_abs();
    if !matches!(size, 1 | 2 | 4 | 8) {
        return Err(unsupported());
    }
    if let Some(imm) = operand.strip_prefix('$') {
        let v = parse_int(imm).ok_or_else(unsupported)?;
        return Ok(ArgSource::Const(
            i32::try_from(v).map_err(|_| unsupported())?,
        ));
    }
    if let Some(r) = operand.strip_prefix('%') {
        let offset = register(r).ok_or_else(unsupported)?;
        return Ok(ArgSource::UserReg {
            offset,
            size,
            signed,
        });
    }
    let (disp, rest) = operand.split_once('(').ok_or_else(unsupported)?;
    let reg = rest
        .strip_suffix(')')
        .and_then(|r| r.strip_prefix('%'))
        .and_then(register)
        .filter(|&r| r != regs::RIP)
        .ok_or_else(unsupported)?;
    let disp = if disp.is_empty() {
        0
    } else {
        parse_int(disp).ok_or_else(unsupported)?
    };
    Ok(ArgSource::UserMem {
        reg,
        disp: i32::try_from(disp).map_err(|_| unsupported())?,
        size,
        signed,
    })
}

/// A decimal or `0x` hexadecimal integer, possibly negative.
fn parse_int(s: &str) -> Option<i64> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let v = match s.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).ok()?,
        None => s.parse().ok()?,
    };
    Some(if neg { -v } else { v })
}

/// The D type of an argument of `size` bytes (negative: signed).
pub fn arg_type(spec: &str) -> String {
    let size: i8 = spec
        .split_once('@')
        .and_then(|(s, _)| s.parse().ok())
        .unwrap_or(8);
    let bits = u32::from(size.unsigned_abs()) * 8;
    if size < 0 {
        format!("int{bits}_t")
    } else {
        format!("uint{bits}_t")
    }
}

/// One USDT probe site of an object, from a stapsdt note or a DOF provider: where the uprobe
/// goes, the semaphore it raises, and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Provider (`python`, without the pid).
    pub provider: String,
    /// The probe name DTrace uses (a note's `gc__start` is `gc-start`).
    pub name: String,
    /// The site's address (link-time; for notes adjusted to where `.stapsdt.base` really is),
    /// which names the probe's function. For a DOF probe with only is-enabled sites, that of
    /// its is-enabled test (its uprobe is elsewhere: see [`super::dof_usdt`]).
    pub vaddr: u64,
    /// File offset of the uprobe.
    pub file_offset: u64,
    /// File offset of the semaphore (0: none).
    pub semaphore_offset: u64,
    /// Where `arg0..` are read at the site.
    pub args: Vec<ArgSource>,
    /// Their types (`args[]`).
    pub types: Vec<super::ProbeArg>,
    /// The provider's stability, where the object declares it (a DOF provider's attributes).
    pub stability: Option<dtrace_dif::attr::ProviderAttributes>,
}

impl Site {
    /// The site of note `note` at `vaddr`: arguments decoded from its operands (an operand not
    /// yet supported reads as 0), typed by their sizes.
    fn of_note(note: Note, vaddr: u64, file_offset: u64, semaphore_offset: u64) -> Site {
        let specs: Vec<&str> = note.args.split_whitespace().collect();
        let args = specs
            .iter()
            .take(crate::capture::layout::NARGS)
            .map(|a| parse_arg(a).unwrap_or(ArgSource::Zero))
            .collect();
        let types = specs
            .iter()
            .map(|a| {
                let t = arg_type(a);
                super::ProbeArg {
                    native: t.clone(),
                    dtype: t,
                    copy: None,
                }
            })
            .collect();
        Site {
            provider: note.provider,
            name: note.name.replace("__", "-"),
            vaddr,
            file_offset,
            semaphore_offset,
            args,
            types,
            stability: None,
        }
    }
}

/// The link-time address to file offset map of an ELF file, from its segments, and reads of its
/// bytes by address.
pub struct FileImage<'a, R: object::ReadRef<'a>> {
    data: R,
    /// Address, file offset, file size, executable.
    segs: Vec<(u64, u64, u64, bool)>,
    _p: std::marker::PhantomData<&'a ()>,
}

impl<'a, R: object::ReadRef<'a>> FileImage<'a, R> {
    /// The segments of `file`, read from `data`.
    pub fn new(file: &object::File<'a, R>, data: R) -> Self {
        let segs = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                let exec = match s.flags() {
                    object::SegmentFlags::Elf { p_flags } => p_flags & object::elf::PF_X != 0,
                    _ => false,
                };
                (s.address(), off, size, exec)
            })
            .collect();
        FileImage {
            data,
            segs,
            _p: std::marker::PhantomData,
        }
    }
}

/// What reading USDT sites needs of an object: file offsets and bytes of link-time addresses.
pub trait Image {
    /// The file offset of `vaddr`, when a segment holds it in the file.
    fn file_offset(&self, vaddr: u64) -> Option<u64>;
    /// The file offset of `vaddr` when an executable segment holds it (a probe site).
    fn code_offset(&self, vaddr: u64) -> Option<u64>;
    /// `len` bytes at `vaddr`, when all are in the file.
    fn bytes(&self, vaddr: u64, len: usize) -> Option<Vec<u8>>;
}

impl<'a, R: object::ReadRef<'a>> Image for FileImage<'a, R> {
    fn file_offset(&self, vaddr: u64) -> Option<u64> {
        self.segs
            .iter()
            .find(|(a, _, size, _)| vaddr >= *a && vaddr - a < *size)
            .map(|(a, off, _, _)| off + (vaddr - a))
    }
    fn code_offset(&self, vaddr: u64) -> Option<u64> {
        self.segs
            .iter()
            .find(|(a, _, size, exec)| *exec && vaddr >= *a && vaddr - a < *size)
            .map(|(a, off, _, _)| off + (vaddr - a))
    }
    fn bytes(&self, vaddr: u64, len: usize) -> Option<Vec<u8>> {
        let off = self.file_offset(vaddr)?;
        let last = self.file_offset(vaddr.checked_add(len.checked_sub(1)? as u64)?)?;
        if last != off + len as u64 - 1 {
            return None;
        }
        self.data
            .read_bytes_at(off, len as u64)
            .ok()
            .map(<[u8]>::to_vec)
    }
}

/// An image whose address `base + i` is byte `i` of `bytes` in the file (tests and fuzzing).
pub struct FlatImage {
    /// Address of the first byte.
    pub base: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
}

impl Image for FlatImage {
    fn file_offset(&self, vaddr: u64) -> Option<u64> {
        let o = vaddr.checked_sub(self.base)?;
        (o < self.bytes.len() as u64).then_some(o)
    }
    fn code_offset(&self, vaddr: u64) -> Option<u64> {
        self.file_offset(vaddr)
    }
    fn bytes(&self, vaddr: u64, len: usize) -> Option<Vec<u8>> {
        let o = usize::try_from(self.file_offset(vaddr)?).ok()?;
        self.bytes.get(o..o.checked_add(len)?).map(<[u8]>::to_vec)
    }
}

/// The bytes of section `data` at link-time address `addr` with the file's dynamic relocations
/// applied as the dynamic linker would at load bias 0: a shared object's DOF holds its probes'
/// addresses as relocations against its (preemptible) function symbols, not in the bytes.
fn relocated<'a, R: object::ReadRef<'a>>(
    file: &object::File<'a, R>,
    addr: u64,
    data: &[u8],
) -> Vec<u8> {
    use object::{ObjectSymbol as _, ObjectSymbolTable as _, RelocationTarget};
    let mut out = data.to_vec();
    let Some(relocs) = file.dynamic_relocations() else {
        return out;
    };
    let dynsyms = file.dynamic_symbol_table();
    for (at, r) in relocs {
        let Some(off) = at.checked_sub(addr).and_then(|o| usize::try_from(o).ok()) else {
            continue;
        };
        let Some(slot) = off.checked_add(8).and_then(|end| out.get_mut(off..end)) else {
            continue;
        };
        if r.size() != 64 {
            continue;
        }
        let base = match r.target() {
            // `R_X86_64_RELATIVE`: the addend alone.
            RelocationTarget::Absolute => 0,
            RelocationTarget::Symbol(i) => {
                match dynsyms.as_ref().and_then(|t| t.symbol_by_index(i).ok()) {
                    Some(s) if s.address() != 0 => s.address(),
                    _ => continue,
                }
            }
            _ => continue,
        };
        slot.copy_from_slice(&base.wrapping_add_signed(r.addend()).to_le_bytes());
    }
    out
}

/// The USDT sites of the ELF file at `path`: its `.note.stapsdt` notes and the probes of the
/// providers in its `.SUNW_dof` sections (none when it has neither). A malformed note section is
/// an error; a malformed DOF section is left out (its probes do not exist).
pub fn read_sites(path: &str) -> Result<Vec<Site>> {
    let f = File::open(path).map_err(|e| LinuxError::from_io(path, e))?;
    let cache = ReadCache::new(f);
    let file = object::File::parse(&cache).map_err(|e| LinuxError::BadFile {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let image = FileImage::new(&file, &cache);
    let mut out = Vec::new();
    for sec in file.sections() {
        if sec.name().ok() != Some(dtrace_dof::SUNW_DOF_SECTION) {
            continue;
        }
        if let Ok(data) = sec.data() {
            let dof = relocated(&file, sec.address(), data);
            out.extend(super::dof_usdt::sites(&dof, &image).unwrap_or_default());
        }
    }
    let Some(sec) = file.section_by_name(".note.stapsdt") else {
        return Ok(out);
    };
    let data = sec.data().map_err(|e| LinuxError::BadFile {
        path: path.into(),
        reason: e.to_string(),
    })?;
    let notes = parse_notes(data)?;
    let base = file.section_by_name(".stapsdt.base").map(|s| s.address());
    for note in notes {
        let vaddr = match base {
            Some(b) if note.base != 0 => note.pc.wrapping_add(b).wrapping_sub(note.base),
            _ => note.pc,
        };
        let Some(file_offset) = image.file_offset(vaddr) else {
            continue;
        };
        let semaphore_offset = if note.semaphore == 0 {
            0
        } else {
            match image.file_offset(note.semaphore) {
                Some(o) => o,
                None => continue,
            }
        };
        out.push(Site::of_note(note, vaddr, file_offset, semaphore_offset));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(provider: &str, name: &str, args: &str) -> Vec<u8> {
        let mut desc = Vec::new();
        desc.extend_from_slice(&0x1000u64.to_le_bytes());
        desc.extend_from_slice(&0x2000u64.to_le_bytes());
        desc.extend_from_slice(&0x3000u64.to_le_bytes());
        for s in [provider, name, args] {
            desc.extend_from_slice(s.as_bytes());
            desc.push(0);
        }
        let mut n = Vec::new();
        n.extend_from_slice(&8u32.to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&NT_STAPSDT.to_le_bytes());
        n.extend_from_slice(b"stapsdt\0");
        let len = desc.len();
        n.extend(desc);
        n.resize(n.len() + (len.next_multiple_of(4) - len), 0);
        n
    }

    #[test]
    fn notes_decode_and_truncation_is_an_error() {
        let mut data = note("python", "gc__start", "-4@%eax");
        data.extend(note("p", "x", ""));
        let notes = parse_notes(&data).unwrap();
        assert_eq!(notes.len(), 2);
        assert_eq!(notes[0].provider, "python");
        assert_eq!(notes[0].name, "gc__start");
        assert_eq!(notes[0].args, "-4@%eax");
        assert_eq!(
            (notes[0].pc, notes[0].base, notes[0].semaphore),
            (0x1000, 0x2000, 0x3000)
        );
        assert!(parse_notes(&data[..data.len() - 9]).is_err());
        assert!(parse_notes(&[1, 2, 3]).is_err());
    }

    #[test]
    fn operands_decode() {
        assert_eq!(
            parse_arg("-4@%eax").unwrap(),
            ArgSource::UserReg {
                offset: regs::RAX,
                size: 4,
                signed: true
            }
        );
        assert_eq!(
            parse_arg("8@16(%rbp)").unwrap(),
            ArgSource::UserMem {
                reg: regs::RBP,
                disp: 16,
                size: 8,
                signed: false
            }
        );
        assert_eq!(
            parse_arg("-4@-112(%r12)").unwrap(),
            ArgSource::UserMem {
                reg: regs::R12,
                disp: -112,
                size: 4,
                signed: true
            }
        );
        assert_eq!(parse_arg("4@$5").unwrap(), ArgSource::Const(5));
        assert_eq!(
            parse_arg("8@%r10d").unwrap(),
            ArgSource::UserReg {
                offset: regs::R10,
                size: 8,
                signed: false
            }
        );
        assert!(parse_arg("8@foo(%rip)").is_err());
        assert!(parse_arg("8@(%rax,%rbx,8)").is_err());
        assert!(parse_arg("3@%eax").is_err());
        assert!(parse_arg("").is_err());
        assert_eq!(arg_type("-4@%eax"), "int32_t");
        assert_eq!(arg_type("8@%rax"), "uint64_t");
    }
}

//! The `.eh_frame` rules of [`unwind`](super::unwind) compiled for a walk at the probe: each
//! file's [`UnwindTable`] becomes a sorted array of fixed-size [`Row`]s (from an address on: the
//! CFA from `rsp` or `rbp` plus an offset, the return address and the saved `rbp` at offsets from
//! the CFA; the *outermost* frame; a *stop* where dtrace's unwinder stops otherwise; *no entry*
//! where it takes one frame-pointer step), all files' rows in one [`RowArena`], and each process's mappings as sorted [`Range`]s
//! (addresses, load bias, the file's rows). [`walk`] is the reference walk over exactly that
//! layout, with the bounded binary searches a BPF program can do ([`last_at_or_below`]); it gives
//! the frames [`unwind::unwind`] gives, or says which PC the layout cannot place.

use super::elf::ElfSymbols;
use super::procmaps::Mapping;
use super::unwind::{self, FpRule, Rule, StackBytes, Step, UnwindTable, Unwound, UserRegs};
use std::collections::HashMap;
use std::sync::Arc;

/// Bytes of one row as the kernel's array holds it: start (u64), kind (u32), then the CFA, return
/// address and frame pointer offsets (i32 each), little-endian.
pub const ROW_BYTES: usize = 24;
/// Bytes of one range as the kernel holds it: start, end, bias (u64 each), first row, row count.
pub const RANGE_BYTES: usize = 32;
/// The most rows of one file, and of all files together.
pub const MAX_FILE_ROWS: usize = 1 << 22;
/// The most rows of all files together.
pub const MAX_ARENA_ROWS: usize = 1 << 22;
/// Steps of a search of a file's rows: enough for [`MAX_FILE_ROWS`].
pub const ROW_SEARCH_STEPS: u32 = 22;
/// The most ranges of one process.
pub const MAX_RANGES: usize = 1 << 13;
/// Steps of a search of a process's ranges: enough for [`MAX_RANGES`].
pub const RANGE_SEARCH_STEPS: u32 = 13;

/// Row kinds: no entry here (one frame-pointer step).
pub const KIND_NO_ENTRY: u32 = 0;
/// The walk stops here (a DWARF expression, another register...).
pub const KIND_STOP: u32 = 1;
/// The CFA is `rsp` plus the offset.
pub const KIND_CFA_SP: u32 = 2;
/// The CFA is `rbp` plus the offset.
pub const KIND_CFA_FP: u32 = 3;
/// The outermost frame (an undefined return address): the walk ends here, whole.
pub const KIND_OUTERMOST: u32 = 4;
/// With a CFA kind: the caller's `rbp` is saved at the CFA plus `fp_offset` (else unchanged).
pub const FLAG_FP_SAVED: u32 = 0x10;

/// Why rules cannot be laid out for the kernel.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowsError {
    /// An offset of a rule does not fit the row's 32 bits.
    #[error("an unwind rule's offset {0} does not fit a row")]
    OffsetTooLarge(i64),
    /// A file has more rows than a search covers.
    #[error("{0} unwind rows for one file (at most {MAX_FILE_ROWS})")]
    TooManyRows(usize),
    /// All files together have more rows than the kernel's array holds.
    #[error("the unwind rows of all files are full ({MAX_ARENA_ROWS})")]
    ArenaFull,
    /// A process has more ranges than a search covers.
    #[error("{0} mapped ranges (at most {MAX_RANGES})")]
    TooManyRanges(usize),
    /// Two mappings of a process overlap.
    #[error("mappings overlap at {0:#x}")]
    Overlap(u64),
}

/// From `start` to the next row's start, how to find the caller's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// First address (in the file's terms).
    pub start: u64,
    /// `KIND_*`, with [`FLAG_FP_SAVED`].
    pub kind: u32,
    /// The CFA's offset from its register.
    pub cfa_offset: i32,
    /// The return address's offset from the CFA.
    pub ra_offset: i32,
    /// The saved `rbp`'s offset from the CFA (with [`FLAG_FP_SAVED`]).
    pub fp_offset: i32,
}

impl Row {
    /// The row for `rule` (as [`UnwindTable::rule_at`] gives it) from `start`.
    fn of(start: u64, rule: Option<Step>) -> Result<Row, RowsError> {
        let fit = |v: i64| i32::try_from(v).map_err(|_| RowsError::OffsetTooLarge(v));
        let mut row = Row {
            start,
            kind: KIND_NO_ENTRY,
            cfa_offset: 0,
            ra_offset: 0,
            fp_offset: 0,
        };
        match rule {
            None => {}
            Some(Step::Stop) => row.kind = KIND_STOP,
            Some(Step::Outermost) => row.kind = KIND_OUTERMOST,
            Some(Step::Caller(r)) => {
                row.kind = if r.cfa_from_fp {
                    KIND_CFA_FP
                } else {
                    KIND_CFA_SP
                };
                row.cfa_offset = fit(r.cfa_offset)?;
                row.ra_offset = fit(r.ra_offset)?;
                if let FpRule::Saved(o) = r.fp {
                    row.kind |= FLAG_FP_SAVED;
                    row.fp_offset = fit(o)?;
                }
            }
        }
        Ok(row)
    }

    /// The step the row stands for, as [`UnwindTable::rule_at`] gives it.
    pub fn rule(&self) -> Option<Step> {
        let cfa_from_fp = match self.kind & !FLAG_FP_SAVED {
            KIND_NO_ENTRY => return None,
            KIND_CFA_SP => false,
            KIND_CFA_FP => true,
            KIND_OUTERMOST => return Some(Step::Outermost),
            _ => return Some(Step::Stop),
        };
        let fp = if self.kind & FLAG_FP_SAVED != 0 {
            FpRule::Saved(i64::from(self.fp_offset))
        } else {
            FpRule::Same
        };
        Some(Step::Caller(Rule {
            cfa_from_fp,
            cfa_offset: i64::from(self.cfa_offset),
            ra_offset: i64::from(self.ra_offset),
            fp,
        }))
    }

    /// Whether `self` and `other` say the same from their starts on.
    fn same_rule(&self, other: &Row) -> bool {
        (self.kind, self.cfa_offset, self.ra_offset, self.fp_offset)
            == (
                other.kind,
                other.cfa_offset,
                other.ra_offset,
                other.fp_offset,
            )
    }

    /// The row as the kernel's array holds it.
    pub fn to_bytes(&self) -> [u8; ROW_BYTES] {
        let mut b = [0u8; ROW_BYTES];
        b[..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..12].copy_from_slice(&self.kind.to_le_bytes());
        b[12..16].copy_from_slice(&self.cfa_offset.to_le_bytes());
        b[16..20].copy_from_slice(&self.ra_offset.to_le_bytes());
        b[20..24].copy_from_slice(&self.fp_offset.to_le_bytes());
        b
    }
}

/// The rows of one file, sorted by start, each holding to the next; the last is a no-entry row.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindRows {
    rows: Vec<Row>,
}

impl UnwindRows {
    /// Compiles `table` (rows that say the same as the one before them are left out).
    pub fn compile(table: &UnwindTable) -> Result<UnwindRows, RowsError> {
        let mut rows: Vec<Row> = Vec::new();
        let mut push = |row: Row| {
            if !rows.last().is_some_and(|l| l.same_rule(&row)) {
                rows.push(row);
            }
        };
        let mut end = None;
        for (lo, hi, rule) in table.ranges() {
            if end.is_some_and(|e| e < lo) {
                push(Row::of(end.unwrap_or(lo), None)?);
            }
            push(Row::of(lo, Some(rule))?);
            end = Some(hi);
        }
        if let Some(e) = end {
            push(Row::of(e, None)?);
        }
        if rows.len() > MAX_FILE_ROWS {
            return Err(RowsError::TooManyRows(rows.len()));
        }
        Ok(UnwindRows { rows })
    }

    /// The rows.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The step at `addr` (in the file's terms), as [`UnwindTable::rule_at`] gives it.
    pub fn rule_at(&self, addr: u64) -> Option<Step> {
        rule_in(&self.rows, addr)
    }
}

/// The step at `addr` in the sorted rows of one file.
fn rule_in(rows: &[Row], addr: u64) -> Option<Step> {
    let i = last_at_or_below(rows, |r| r.start, addr, ROW_SEARCH_STEPS)?;
    rows.get(i)?.rule()
}

/// The index of the last of `items` (sorted by `key`) whose key is at or below `addr`, found in
/// at most `steps` halvings as a BPF program finds it: `None` when there is none, or when `steps`
/// do not cover `items` (the layout's limits keep them covered).
pub fn last_at_or_below<T>(
    items: &[T],
    key: impl Fn(&T) -> u64,
    addr: u64,
    steps: u32,
) -> Option<usize> {
    // Every step runs (a step on one item changes nothing), as a BPF program's unrolled steps.
    let (mut base, mut len) = (0usize, items.len());
    for _ in 0..steps {
        let half = len / 2;
        if key(items.get(base + half)?) <= addr {
            base += half;
        }
        len -= half;
    }
    (len == 1 && key(items.get(base)?) <= addr).then_some(base)
}

/// The rows of every file the walk may meet, one array, each file's rows once.
#[derive(Debug, Default)]
pub struct RowArena {
    rows: Vec<Row>,
    /// By path: the file's `(first row, count)`; `None` for a file without `.eh_frame`.
    files: HashMap<String, Result<Option<(u32, u32)>, RowsError>>,
}

impl RowArena {
    /// An empty arena.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every row.
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The rows of the file at `path` (`table()` gives its unwind table the first time), added
    /// when new: `(first, count)`, `None` when it has no table.
    pub fn file_rows(
        &mut self,
        path: &str,
        table: impl FnOnce() -> Option<Arc<UnwindTable>>,
    ) -> Result<Option<(u32, u32)>, RowsError> {
        if let Some(r) = self.files.get(path) {
            return r.clone();
        }
        let r = match table() {
            None => Ok(None),
            Some(t) => UnwindRows::compile(&t).and_then(|rows| self.add(&rows).map(Some)),
        };
        self.files.insert(path.to_string(), r.clone());
        r
    }

    fn add(&mut self, rows: &UnwindRows) -> Result<(u32, u32), RowsError> {
        let first = self.rows.len();
        let n = rows.rows.len();
        if first + n > MAX_ARENA_ROWS {
            return Err(RowsError::ArenaFull);
        }
        self.rows.extend_from_slice(&rows.rows);
        let to_u32 = |v: usize| u32::try_from(v).map_err(|_| RowsError::ArenaFull);
        Ok((to_u32(first)?, to_u32(n)?))
    }
}

/// Addresses `[start, end)` of a process: the file's rows there (`count` 0: one frame-pointer
/// step, as for code no file's `.eh_frame` describes), and the load bias (`pc - bias` is the
/// address in the file's terms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    /// First address.
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
    /// Load bias.
    pub bias: u64,
    /// The file's first row in the arena.
    pub first: u32,
    /// Its number of rows.
    pub count: u32,
}

impl Range {
    /// The range as the kernel holds it.
    pub fn to_bytes(&self) -> [u8; RANGE_BYTES] {
        let mut b = [0u8; RANGE_BYTES];
        b[..8].copy_from_slice(&self.start.to_le_bytes());
        b[8..16].copy_from_slice(&self.end.to_le_bytes());
        b[16..24].copy_from_slice(&self.bias.to_le_bytes());
        b[24..28].copy_from_slice(&self.first.to_le_bytes());
        b[28..32].copy_from_slice(&self.count.to_le_bytes());
        b
    }
}

/// What the walk needs of one mapped file: its symbols (segments) and rows.
pub type MappedFile = (Arc<ElfSymbols>, Option<(u32, u32)>);

/// Pieces of a file the kernel's files map holds (a file with more is left out of it).
pub const FILE_PIECES: usize = 8;
/// Bytes of a piece: its first and end file offsets, what turns a file offset in it into the
/// address the rows are searched with, the file's first row and their count.
pub const PIECE_BYTES: usize = 32;
/// Bytes of a file's value in the kernel's files map: the count of pieces, then the pieces.
pub const FILE_VALUE_BYTES: usize = 8 + FILE_PIECES * PIECE_BYTES;
/// Bytes of a key of the kernel's files map: the device (u32), 4 zero bytes, the inode (u64).
pub const FILE_KEY_BYTES: usize = 16;

/// The key of file `id` in the kernel's files map.
pub fn file_key(id: crate::symbols::procmaps::FileId) -> [u8; FILE_KEY_BYTES] {
    let mut k = [0u8; FILE_KEY_BYTES];
    k[..4].copy_from_slice(&id.dev.to_le_bytes());
    k[8..].copy_from_slice(&id.ino.to_le_bytes());
    k
}

/// The value of a file in the kernel's files map, for a walk that finds a PC's file (and its
/// offset there) without the process's ranges: each piece of the file through a segment, with
/// what turns an offset in it into the address its rows are searched with (as
/// [`process_ranges`] places an address of a mapping of it); `None` for a file with more
/// pieces than the value holds or without rows.
pub fn file_value(elf: &ElfSymbols, rows: Option<(u32, u32)>) -> Option<[u8; FILE_VALUE_BYTES]> {
    let (first, count) = rows?;
    let pieces: Vec<(u64, u64, u64)> = elf
        .file_offset_pieces(0, u64::MAX)
        .into_iter()
        .filter_map(|(lo, hi, vaddr)| Some((lo, hi, vaddr?.wrapping_sub(lo))))
        .collect();
    if pieces.is_empty() || pieces.len() > FILE_PIECES {
        return None;
    }
    let mut v = [0u8; FILE_VALUE_BYTES];
    v[..8].copy_from_slice(&(pieces.len() as u64).to_le_bytes());
    for (i, (lo, hi, delta)) in pieces.iter().enumerate() {
        let p = 8 + i * PIECE_BYTES;
        v[p..p + 8].copy_from_slice(&lo.to_le_bytes());
        v[p + 8..p + 16].copy_from_slice(&hi.to_le_bytes());
        v[p + 16..p + 24].copy_from_slice(&delta.to_le_bytes());
        v[p + 24..p + 28].copy_from_slice(&first.to_le_bytes());
        v[p + 28..p + 32].copy_from_slice(&count.to_le_bytes());
    }
    Some(v)
}

/// The ranges of a process with mappings `maps`, each address placed as the symbolizer places it
/// for [`unwind::unwind`]: a file's (`file(path)`, `None` when it cannot be read) rows and the bias
/// of the segment holding the address's file offset; no rows for anything else.
pub fn process_ranges(
    maps: &[Mapping],
    mut file: impl FnMut(&str) -> Result<Option<MappedFile>, RowsError>,
) -> Result<Vec<Range>, RowsError> {
    let mut out = Vec::new();
    for m in maps {
        let plain = Range {
            start: m.start,
            end: m.end,
            bias: 0,
            first: 0,
            count: 0,
        };
        let Some((elf, rows)) = (if m.path.starts_with('/') {
            file(&m.path)?
        } else {
            None
        }) else {
            out.push(plain);
            continue;
        };
        for (lo, hi, vaddr) in elf.file_offset_pieces(m.offset, m.end - m.start) {
            let start = m.start + (lo - m.offset);
            let mut r = Range {
                start,
                end: m.start + (hi - m.offset),
                ..plain
            };
            if let (Some(v), Some((first, count))) = (vaddr, rows) {
                (r.bias, r.first, r.count) = (start.wrapping_sub(v), first, count);
            }
            out.push(r);
        }
    }
    out.sort_by_key(|r| r.start);
    if let Some(w) = out.windows(2).find(|w| w[0].end > w[1].start) {
        return Err(RowsError::Overlap(w[1].start));
    }
    if out.len() > MAX_RANGES {
        return Err(RowsError::TooManyRanges(out.len()));
    }
    Ok(out)
}

/// A PC (as looked up: a return address less one) the layout cannot place: no range holds it (dtrace would read the process's mappings
/// again), so the walk must be left to dtrace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no mapping holds {0:#x}")]
pub struct Unplaced(pub u64);

/// The reference walk over the kernel's layout: the frames [`unwind::unwind`] gives from `regs`
/// and `stack` (the same limits: `max` frames, saved values inside the copied bytes, the stack
/// pointer moving up), the rules found by a search of the process's `ranges` and then of the
/// file's rows in `rows`.
pub fn walk(
    regs: UserRegs,
    stack: StackBytes<'_>,
    max: usize,
    rows: &[Row],
    ranges: &[Range],
) -> Result<Unwound, Unplaced> {
    let mut unplaced = None;
    let frames = unwind::unwind_with(regs, stack, max, |pc| {
        let range = last_at_or_below(ranges, |r| r.start, pc, RANGE_SEARCH_STEPS)
            .and_then(|i| ranges.get(i))
            .filter(|r| pc < r.end);
        let Some(r) = range else {
            unplaced = Some(pc);
            return Some(Step::Stop);
        };
        if r.count == 0 {
            return None;
        }
        let (first, count) = (r.first as usize, r.count as usize);
        match rows.get(first..first + count) {
            Some(file) => rule_in(file, pc.wrapping_sub(r.bias)),
            None => {
                unplaced = Some(pc);
                Some(Step::Stop)
            }
        }
    });
    match unplaced {
        Some(pc) => Err(Unplaced(pc)),
        None => Ok(frames),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_finds_the_last_start_at_or_below() {
        let keys: Vec<u64> = (0..1000).map(|i| 10 + 3 * i).collect();
        for addr in 0..3100 {
            let want = keys.iter().rposition(|k| *k <= addr);
            assert_eq!(last_at_or_below(&keys, |k| *k, addr, 10), want, "{addr}");
        }
        assert_eq!(last_at_or_below(&[] as &[u64], |k| *k, 5, 10), None);
        // Too few steps for the items: none rather than a wrong one.
        assert_eq!(last_at_or_below(&keys, |k| *k, 2000, 3), None);
    }

    #[test]
    fn rows_round_trip_their_rules() {
        let rules = [
            None,
            Some(Step::Stop),
            Some(Step::Outermost),
            Some(Step::Caller(Rule {
                cfa_from_fp: false,
                cfa_offset: 8,
                ra_offset: -8,
                fp: FpRule::Same,
            })),
            Some(Step::Caller(Rule {
                cfa_from_fp: true,
                cfa_offset: 16,
                ra_offset: -8,
                fp: FpRule::Saved(-16),
            })),
        ];
        for r in rules {
            assert_eq!(Row::of(0x1000, r).unwrap().rule(), r);
        }
        let big = Some(Step::Caller(Rule {
            cfa_from_fp: false,
            cfa_offset: 1 << 40,
            ra_offset: -8,
            fp: FpRule::Same,
        }));
        assert_eq!(Row::of(0, big), Err(RowsError::OffsetTooLarge(1 << 40)));
        let row = Row::of(0x1122, rules[4]).unwrap();
        let b = row.to_bytes();
        assert_eq!(u64::from_le_bytes(b[..8].try_into().unwrap()), 0x1122);
        assert_eq!(
            u32::from_le_bytes(b[8..12].try_into().unwrap()),
            KIND_CFA_FP | FLAG_FP_SAVED
        );
        assert_eq!(i32::from_le_bytes(b[20..24].try_into().unwrap()), -16);
    }

    /// A stack of frame-pointer steps only (no file maps the PCs' range with rows): the walk
    /// stops where the frame pointer does not move the stack up, and where a saved value lies
    /// past the copied bytes, as `unwind` does; a PC outside every range is left to dtrace.
    #[test]
    fn frame_pointer_steps_stop_as_unwind_stops() {
        let sp = 0x7fff_0000u64;
        let mut stack = vec![0u8; 256];
        let mut put = |o: usize, v: u64| stack[o..o + 8].copy_from_slice(&v.to_ne_bytes());
        // fp chain: sp+0x10 -> sp+0x40 -> sp+0x20 (down: stop).
        put(0x10, sp + 0x40);
        put(0x18, 0x40_2000);
        put(0x40, sp + 0x20);
        put(0x48, 0x40_3000);
        put(0x20, sp + 0x80);
        put(0x28, 0x40_4000);
        let regs = UserRegs {
            pc: 0x40_1000,
            sp,
            fp: sp + 0x10,
        };
        let ranges = [Range {
            start: 0x40_0000,
            end: 0x50_0000,
            bias: 0,
            first: 0,
            count: 0,
        }];
        let bytes = StackBytes {
            base: sp,
            bytes: &stack,
        };
        let want = unwind::unwind(regs, bytes, 32, |_| None);
        assert_eq!(want.frames, vec![0x40_1000, 0x40_2000, 0x40_3000]);
        assert!(!want.outermost);
        assert_eq!(walk(regs, bytes, 32, &[], &ranges), Ok(want));
        // The second saved pair past the copy: two frames.
        let short = StackBytes {
            base: sp,
            bytes: &stack[..0x48],
        };
        let want = unwind::unwind(regs, short, 32, |_| None);
        assert_eq!(want.frames.len(), 2);
        assert_eq!(walk(regs, short, 32, &[], &ranges), Ok(want));
        // The frame limit.
        let first = Unwound {
            frames: vec![0x40_1000],
            outermost: false,
        };
        assert_eq!(walk(regs, bytes, 1, &[], &ranges), Ok(first));
        // A return address no range holds (the call before 0x40_3000 is looked up).
        let ranges = [Range {
            end: 0x40_2000,
            ..ranges[0]
        }];
        assert_eq!(
            walk(regs, bytes, 32, &[], &ranges),
            Err(Unplaced(0x40_3000 - 1))
        );
    }
}

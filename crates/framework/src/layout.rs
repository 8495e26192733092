//! Record layout of enabled probes (`dtrace_ecb_action_add` and `dtrace_ecb_resize`): each action's
//! record size and alignment from its kind and DIF return type, offsets of the data records after the
//! 12-byte header, the separate key-and-value layout of each aggregation, and the checks DTrace makes on
//! an action list (tuples precede an aggregating action, `speculate()` precedes data, one `commit()`,
//! no data after `commit()`).

use crate::aggregate::{value_size, AggParamError};
use crate::options::Options;
use crate::records::{RecDesc, RECHDR_SIZE};
use dtrace_dif::program::{ActionDesc, ActionKind, EcbDesc, PRINTF_FIRST_UNSIGNED};
use thiserror::Error;

/// Why an ECB's actions cannot be laid out.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// An aggregating action's key count reaches before the first action or over non-key actions.
    #[error(
        "action #{0}: aggregation keys must be trace expressions preceding the aggregating action"
    )]
    BadTuple(usize),
    /// `speculate()` after a data-recording action.
    #[error("action #{0}: speculate() may not follow data-recording actions")]
    SpeculateAfterData(usize),
    /// A data-recording action or `speculate()` after `commit()`, or two commits.
    #[error("action #{0}: no data-recording action may follow commit()")]
    AfterCommit(usize),
    /// Aggregating or `exit()` in a speculative clause.
    #[error("action #{0}: aggregating and exit actions may not be speculative")]
    SpeculativeAgg(usize),
    /// An action that needs a DIF object has none.
    #[error("action #{0}: missing expression")]
    MissingDifo(usize),
    /// A value that must be a 64-bit integer by value is not.
    #[error("action #{0}: expression has the wrong type for this action")]
    BadType(usize),
    /// An aggregating function's parameters are invalid.
    #[error("action #{0}: {1}")]
    AggParam(usize, AggParamError),
    /// The record (or an aggregation's key and value) would be larger than [`MAX_RECORD`].
    #[error("action #{0}: record too large")]
    TooLarge(usize),
}

/// Where one action's data goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionLayout {
    /// Its record description (offset within the principal record, or within the aggregation key for
    /// keys and the value for aggregating actions).
    pub rec: RecDesc,
    /// Whether it is an aggregation key.
    pub in_tuple: bool,
    /// For a key: whether it is the first key of its aggregation.
    pub key_first: bool,
    /// For a key: whether it is the last key of its aggregation.
    pub key_last: bool,
    /// Whether it is the increment (weight) of a quantize-family aggregating action: a zero-size
    /// `DifExpr` counted in the action's `ntuple` (DTrace's `dtag_hasarg`), not a key.
    pub is_incr: bool,
    /// For an aggregating action: index into [`EcbLayout::aggs`].
    pub agg: Option<usize>,
}

/// The layout of one aggregating action's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggLayout {
    /// Index of the aggregating action.
    pub action: usize,
    /// Indices of its key actions.
    pub keys: Vec<usize>,
    /// Index of its increment action, if it has one.
    pub incr: Option<usize>,
    /// Key records (offsets from the start of the key bytes) then the value record.
    pub recs: Vec<RecDesc>,
    /// Length of the key bytes (the value record's offset).
    pub key_size: u32,
    /// Value words.
    pub value_words: usize,
}

impl AggLayout {
    /// Bytes of scratch one update needs: aggregation id, keys and value.
    pub fn needed(&self) -> u64 {
        4 + self.key_size as u64 + self.value_words as u64 * 8
    }
}

/// The layout of one ECB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcbLayout {
    /// Bytes of one principal record, header included; 0 when the clause records nothing.
    pub size: u32,
    /// Alignment of the record.
    pub alignment: u32,
    /// Per action.
    pub actions: Vec<ActionLayout>,
    /// Per aggregating action.
    pub aggs: Vec<AggLayout>,
    /// Whether the clause begins with `speculate()`.
    pub speculative: bool,
}

impl EcbLayout {
    /// The records of the principal record (every action but keys and aggregating ones), as published in
    /// the EPID's description.
    pub fn principal_recs(&self) -> Vec<RecDesc> {
        self.actions
            .iter()
            .filter(|a| !a.in_tuple && a.agg.is_none())
            .map(|a| a.rec)
            .collect()
    }
}

/// Largest record, and largest aggregation key plus value, an ECB may have (64 MiB; DTrace's records are
/// further bounded by `bufsize`, which is checked when tracing starts).
pub const MAX_RECORD: u64 = 64 << 20;

fn round_up(n: u64, a: u64) -> u64 {
    n.div_ceil(a).saturating_mul(a)
}

/// Record alignment from size as DTrace derives it: the largest power of two up to 8 dividing it.
pub fn alignment_for(size: u32) -> u16 {
    if size == 0 {
        1
    } else if size.is_multiple_of(8) {
        8
    } else if size.is_multiple_of(4) {
        4
    } else if size.is_multiple_of(2) {
        2
    } else {
        1
    }
}

/// Size of the record one action produces, and its (possibly defaulted) `arg`.
fn action_size(i: usize, a: &ActionDesc, opts: &Options) -> Result<(u64, u64), LayoutError> {
    use ActionKind as K;
    let n = i + 1;
    let expr_size = |a: &ActionDesc| -> u64 {
        match &a.difo {
            None => 0,
            Some(d) if d.rtype.size != 0 => d.rtype.size as u64,
            Some(d) if d.rtype.is_string() => opts.string_storage(),
            Some(_) => 0,
        }
    };
    let int64 = |a: &ActionDesc| -> Result<(), LayoutError> {
        match &a.difo {
            None => Err(LayoutError::MissingDifo(n)),
            Some(d) if d.rtype.size != 8 || d.rtype.is_by_ref() => Err(LayoutError::BadType(n)),
            Some(_) => Ok(()),
        }
    };
    Ok(match a.kind {
        // A printf-like action without arguments still records a 4-byte zero, as libdtrace gives it
        // a `ret %r0` object of type int: so `BEGIN { printf("hello\n"); }` records something.
        K::Printf | K::Printa | K::System | K::Freopen if a.difo.is_none() => (4, a.arg),
        K::DifExpr | K::Printf | K::Printa | K::System | K::Freopen | K::LibAct => {
            (expr_size(a), a.arg)
        }
        K::Tracemem | K::TracememDynsize => {
            if a.difo.is_none() {
                return Err(LayoutError::MissingDifo(n));
            }
            let s = expr_size(a);
            (if s != 0 { s } else { a.arg }, a.arg)
        }
        K::Stack => {
            let frames = if a.arg == 0 { opts.stackframes } else { a.arg };
            (frames.saturating_mul(8), frames)
        }
        K::Ustack | K::Jstack => {
            let mut frames = a.arg & 0xffff_ffff;
            let mut strsize = a.arg >> 32;
            if a.kind == K::Jstack {
                if frames == 0 {
                    frames = opts.jstackframes;
                }
                if strsize == 0 {
                    strsize = opts.jstackstrsize;
                }
            } else if frames == 0 {
                frames = opts.ustackframes;
            }
            let size = round_up(
                (frames.saturating_add(1))
                    .saturating_mul(8)
                    .saturating_add(strsize),
                8,
            );
            (size, frames | (strsize << 32))
        }
        K::Sym | K::Mod => {
            int64(a)?;
            (8, a.arg)
        }
        K::Usym | K::Umod | K::Uaddr => {
            int64(a)?;
            (16, a.arg)
        }
        // raise() records its signal, as DTrace does: a firing that raises one is seen (its probe
        // line printed) though nothing of the record is.
        K::Exit | K::Raise => {
            if a.difo.is_none() {
                return Err(LayoutError::MissingDifo(n));
            }
            (4, a.arg)
        }
        K::Chill | K::Discard | K::Speculate | K::Commit => {
            if a.difo.is_none() {
                return Err(LayoutError::MissingDifo(n));
            }
            (0, a.arg)
        }
        K::Stop | K::Breakpoint | K::Panic | K::None => (0, a.arg),
        k if k.is_aggregation() => (
            value_size(k, a.arg).map_err(|e| LayoutError::AggParam(n, e))? as u64,
            a.arg,
        ),
        _ => (0, a.arg),
    })
}

/// Whether an action may be an aggregation key: a D expression, or a stack or symbol record
/// (`@[stack()]`, `@[ustack()]`, `@[sym(arg0)]`, `@[usym(arg1)]`...), as in DTrace.
fn is_key_kind(kind: ActionKind) -> bool {
    use ActionKind as K;
    matches!(
        kind,
        K::DifExpr
            | K::Stack
            | K::Ustack
            | K::Jstack
            | K::Sym
            | K::Mod
            | K::Usym
            | K::Umod
            | K::Uaddr
    )
}

/// Lays out one ECB's actions under `opts`.
pub fn layout_ecb(ecb: &EcbDesc, opts: &Options) -> Result<EcbLayout, LayoutError> {
    let acts = &ecb.actions;
    // Mark the key actions of each aggregating action.
    let mut in_tuple = vec![false; acts.len()];
    let mut is_incr = vec![false; acts.len()];
    for (i, a) in acts.iter().enumerate() {
        if a.kind.is_aggregation() {
            let k = a.ntuple as usize;
            if k > i {
                return Err(LayoutError::BadTuple(i + 1));
            }
            for j in i - k..i {
                if !is_key_kind(acts[j].kind) || in_tuple[j] {
                    return Err(LayoutError::BadTuple(i + 1));
                }
                in_tuple[j] = true;
            }
            let quantizing = matches!(
                a.kind,
                ActionKind::AggQuantize | ActionKind::AggLquantize | ActionKind::AggLlquantize
            );
            let zero_size = |d: &ActionDesc| {
                d.difo
                    .as_ref()
                    .is_some_and(|o| o.rtype.size == 0 && !o.rtype.is_string())
            };
            if quantizing && k >= 1 && zero_size(&acts[i - 1]) {
                is_incr[i - 1] = true;
            }
        }
    }

    let mut size: u64 = RECHDR_SIZE as u64;
    let mut alignment: u64 = 4;
    let mut out = Vec::with_capacity(acts.len());
    let mut aggs = Vec::new();
    let mut key_off: u64 = 0;
    let mut keys: Vec<usize> = Vec::new();
    let mut key_recs: Vec<RecDesc> = Vec::new();
    let mut speculative = false;
    let mut committed = false;
    for (i, a) in acts.iter().enumerate() {
        let (rsize, arg) = action_size(i, a, opts)?;
        if rsize > MAX_RECORD {
            return Err(LayoutError::TooLarge(i + 1));
        }
        let rsize32 = rsize as u32;
        let align = alignment_for(rsize32);
        let mut rec = RecDesc {
            action: a.kind,
            size: rsize32,
            offset: 0,
            alignment: align,
            format: 0,
            arg,
        };
        if matches!(
            a.kind,
            ActionKind::Printf | ActionKind::Printa | ActionKind::System | ActionKind::Freopen
        ) {
            rec.format = u16::try_from(a.arg.saturating_add(1)).unwrap_or(0);
            if a.kind != ActionKind::Printa && a.uarg == PRINTF_FIRST_UNSIGNED {
                rec.arg |= PRINTF_FIRST_UNSIGNED;
            }
        }
        match a.kind {
            ActionKind::Speculate => {
                if size > RECHDR_SIZE as u64 || committed {
                    return Err(if committed {
                        LayoutError::AfterCommit(i + 1)
                    } else {
                        LayoutError::SpeculateAfterData(i + 1)
                    });
                }
                speculative = true;
            }
            // DTrace for Linux lets a clause commit (and discard) several speculations.
            ActionKind::Commit => committed = true,
            ActionKind::Discard => {}
            _ => {
                if rsize != 0 && committed {
                    return Err(LayoutError::AfterCommit(i + 1));
                }
            }
        }
        if speculative && (a.kind.is_aggregation() || a.kind == ActionKind::Exit) {
            return Err(LayoutError::SpeculativeAgg(i + 1));
        }
        alignment = alignment.max(align as u64);
        if a.kind.is_aggregation() {
            let value_off = round_up(key_off, 8);
            rec.offset = u32::try_from(value_off).map_err(|_| LayoutError::TooLarge(i + 1))?;
            let mut recs = std::mem::take(&mut key_recs);
            recs.push(rec);
            aggs.push(AggLayout {
                action: i,
                incr: (i > 0 && is_incr[i - 1]).then(|| i - 1),
                keys: std::mem::take(&mut keys),
                recs,
                key_size: rec.offset,
                value_words: rsize as usize / 8,
            });
            key_off = 0;
            out.push(ActionLayout {
                rec,
                in_tuple: false,
                key_first: false,
                key_last: false,
                is_incr: false,
                agg: Some(aggs.len() - 1),
            });
        } else if is_incr[i] {
            out.push(ActionLayout {
                rec,
                in_tuple: true,
                key_first: false,
                key_last: false,
                is_incr: true,
                agg: None,
            });
        } else if in_tuple[i] {
            key_off = round_up(key_off, align as u64);
            rec.offset = u32::try_from(key_off).map_err(|_| LayoutError::TooLarge(i + 1))?;
            key_off += rsize;
            if key_off > MAX_RECORD {
                return Err(LayoutError::TooLarge(i + 1));
            }
            keys.push(i);
            key_recs.push(rec);
            out.push(ActionLayout {
                rec,
                in_tuple: true,
                key_first: keys.len() == 1,
                key_last: acts.get(i + 1).is_some_and(|n| n.kind.is_aggregation())
                    || is_incr.get(i + 1).copied().unwrap_or(false),
                is_incr: false,
                agg: None,
            });
        } else {
            size = round_up(size, align as u64);
            rec.offset = u32::try_from(size).map_err(|_| LayoutError::TooLarge(i + 1))?;
            size += rsize;
            if size > MAX_RECORD {
                return Err(LayoutError::TooLarge(i + 1));
            }
            out.push(ActionLayout {
                rec,
                in_tuple: false,
                key_first: false,
                key_last: false,
                is_incr: false,
                agg: None,
            });
        }
    }
    let only_speculate = acts.len() == 1 && acts[0].kind == ActionKind::Speculate;
    // a consumer action (ftruncate()) is carried out from its record, even one with no data
    let for_consumer = acts.iter().any(|a| a.kind == ActionKind::LibAct);
    if !acts.is_empty() && !only_speculate && !for_consumer && size == RECHDR_SIZE as u64 {
        size = 0;
    }
    let size = round_up(size, 4);
    Ok(EcbLayout {
        size: size as u32,
        alignment: alignment as u32,
        actions: out,
        aggs,
        speculative,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dtrace_dif::object::{DifObject, DifType};
    use dtrace_dif::program::{lquantize_arg, ProbeDesc};

    fn act(kind: ActionKind, rtype: Option<DifType>) -> ActionDesc {
        ActionDesc {
            kind,
            difo: rtype.map(|t| DifObject {
                rtype: t,
                ..Default::default()
            }),
            arg: 0,
            uarg: 0,
            ntuple: 0,
        }
    }

    fn ecb(actions: Vec<ActionDesc>) -> EcbDesc {
        EcbDesc {
            probe: ProbeDesc::default(),
            predicate: None,
            actions,
            line: 0,
        }
    }

    #[test]
    fn empty_clause_records_header() {
        let l = layout_ecb(&ecb(vec![]), &Options::default()).unwrap();
        assert_eq!(l.size, 12);
        assert!(l.principal_recs().is_empty());
    }

    #[test]
    fn trace_records_are_aligned() {
        let o = Options::default();
        let l = layout_ecb(
            &ecb(vec![
                act(ActionKind::DifExpr, Some(DifType::integer(4))),
                act(ActionKind::DifExpr, Some(DifType::integer(8))),
                act(ActionKind::DifExpr, Some(DifType::string(0))),
                act(ActionKind::DifExpr, Some(DifType::integer(1))),
            ]),
            &o,
        )
        .unwrap();
        let r = l.principal_recs();
        assert_eq!((r[0].offset, r[0].size, r[0].alignment), (12, 4, 4));
        assert_eq!((r[1].offset, r[1].size, r[1].alignment), (16, 8, 8));
        // A string takes strsize characters and the NUL.
        assert_eq!((r[2].offset, r[2].size, r[2].alignment), (24, 257, 1));
        assert_eq!((r[3].offset, r[3].size, r[3].alignment), (281, 1, 1));
        assert_eq!(l.size, 284);
        assert_eq!(l.alignment, 8);
    }

    #[test]
    fn printf_without_args_and_exit() {
        let mut p = act(ActionKind::Printf, None);
        p.arg = 2;
        let l = layout_ecb(
            &ecb(vec![p, act(ActionKind::Exit, Some(DifType::integer(4)))]),
            &Options::default(),
        )
        .unwrap();
        let r = l.principal_recs();
        assert_eq!((r[0].offset, r[0].size, r[0].format), (12, 4, 3));
        assert_eq!((r[1].offset, r[1].size, r[1].alignment), (16, 4, 4));
        assert_eq!(l.size, 20);
        // printf("hello\n") alone still makes a record.
        let mut p = act(ActionKind::Printf, None);
        p.arg = 0;
        let l = layout_ecb(&ecb(vec![p]), &Options::default()).unwrap();
        assert_eq!(l.size, 16);
    }

    #[test]
    fn printf_of_an_unsigned_first_argument_marks_its_record() {
        let mut p = act(ActionKind::Printf, Some(DifType::integer(1)));
        p.arg = 2;
        p.uarg = PRINTF_FIRST_UNSIGNED;
        let l = layout_ecb(&ecb(vec![p]), &Options::default()).unwrap();
        let r = l.principal_recs();
        assert_eq!((r[0].size, r[0].format), (1, 3));
        assert_eq!(r[0].arg, 2 | PRINTF_FIRST_UNSIGNED);
        // unmarked, its arg is the format's index alone
        let mut p = act(ActionKind::Printf, Some(DifType::integer(1)));
        p.arg = 2;
        let l = layout_ecb(&ecb(vec![p]), &Options::default()).unwrap();
        assert_eq!(l.principal_recs()[0].arg, 2);
    }

    #[test]
    fn assignment_only_clause_records_nothing() {
        let l = layout_ecb(
            &ecb(vec![act(ActionKind::DifExpr, Some(DifType::default()))]),
            &Options::default(),
        )
        .unwrap();
        assert_eq!(l.size, 0);
    }

    #[test]
    fn an_ftruncate_only_clause_still_records_for_the_consumer() {
        let mut f = act(ActionKind::LibAct, None);
        f.arg = dtrace_dif::program::LibAction::Ftruncate as u64;
        let l = layout_ecb(&ecb(vec![f]), &Options::default()).unwrap();
        assert_eq!(l.size, RECHDR_SIZE);
    }

    #[test]
    fn aggregation_keys_and_value() {
        let mut agg = act(ActionKind::AggLquantize, Some(DifType::integer(8)));
        agg.arg = lquantize_arg(0, 10, 1);
        agg.ntuple = 2;
        let l = layout_ecb(
            &ecb(vec![
                act(ActionKind::DifExpr, Some(DifType::string(0))),
                act(ActionKind::DifExpr, Some(DifType::integer(4))),
                agg,
            ]),
            &Options::default(),
        )
        .unwrap();
        assert_eq!(l.size, 0);
        assert_eq!(l.aggs.len(), 1);
        let a = &l.aggs[0];
        assert_eq!(a.keys, vec![0, 1]);
        assert_eq!((a.recs[0].offset, a.recs[0].size), (0, 257));
        assert_eq!((a.recs[1].offset, a.recs[1].size), (260, 4));
        assert_eq!((a.recs[2].offset, a.recs[2].size), (264, 13 * 8));
        assert_eq!(a.key_size, 264);
        assert_eq!(a.value_words, 13);
    }

    #[test]
    fn quantize_increment_is_not_a_key() {
        let mut q = act(ActionKind::AggQuantize, Some(DifType::integer(8)));
        q.ntuple = 2;
        let l = layout_ecb(
            &ecb(vec![
                act(ActionKind::DifExpr, Some(DifType::integer(8))),
                act(ActionKind::DifExpr, Some(DifType::integer(0))),
                q,
            ]),
            &Options::default(),
        )
        .unwrap();
        let a = &l.aggs[0];
        assert_eq!(a.keys, vec![0]);
        assert_eq!(a.incr, Some(1));
        assert_eq!(a.recs.len(), 2);
        assert_eq!(a.key_size, 8);
        assert!(l.actions[0].key_last);
        assert!(l.actions[1].is_incr);
    }

    #[test]
    fn speculation_rules() {
        let o = Options::default();
        let spec = || act(ActionKind::Speculate, Some(DifType::integer(8)));
        let data = || act(ActionKind::DifExpr, Some(DifType::integer(8)));
        let commit = || act(ActionKind::Commit, Some(DifType::integer(8)));
        let l = layout_ecb(&ecb(vec![spec()]), &o).unwrap();
        assert_eq!(l.size, 12);
        assert!(l.speculative);
        assert!(layout_ecb(&ecb(vec![spec(), data()]), &o).is_ok());
        assert_eq!(
            layout_ecb(&ecb(vec![data(), spec()]), &o),
            Err(LayoutError::SpeculateAfterData(2))
        );
        assert_eq!(
            layout_ecb(&ecb(vec![commit(), data()]), &o),
            Err(LayoutError::AfterCommit(2))
        );
        // Several commits and discards in one clause are allowed (DTrace for Linux).
        let discard = || act(ActionKind::Discard, Some(DifType::integer(8)));
        assert!(layout_ecb(&ecb(vec![commit(), commit(), commit()]), &o).is_ok());
        assert!(layout_ecb(&ecb(vec![commit(), discard(), commit(), discard()]), &o).is_ok());
        let mut c = act(ActionKind::AggCount, None);
        c.ntuple = 0;
        assert_eq!(
            layout_ecb(&ecb(vec![spec(), c]), &o),
            Err(LayoutError::SpeculativeAgg(2))
        );
    }

    #[test]
    fn stacks_take_defaults() {
        let o = Options::default();
        let l = layout_ecb(
            &ecb(vec![
                act(ActionKind::Stack, None),
                act(ActionKind::Ustack, None),
            ]),
            &o,
        )
        .unwrap();
        let r = l.principal_recs();
        assert_eq!((r[0].size, r[0].arg), (160, 20));
        assert_eq!((r[1].size, r[1].arg), (168, 20));
    }

    #[test]
    fn bad_tuple() {
        let mut c = act(ActionKind::AggCount, None);
        c.ntuple = 1;
        assert_eq!(
            layout_ecb(&ecb(vec![c]), &Options::default()),
            Err(LayoutError::BadTuple(1))
        );
    }
}

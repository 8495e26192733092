//! Merging of a probe's kernel copies: copies of one object (one base and the same pointer hops)
//! that overlap or lie close together are made as one, and while the probe asks for more copies
//! than a capture makes, the closest are joined.

use crate::capture::spec::{ArgIndex, MAX_COPIES, MAX_COPY_SIZE};
use crate::capture::{AddrBase, AddrExpr, CopyRequest, MemKind};

/// Kernel copies closer than this many bytes to each other in one object are made as one.
const MERGE_GAP: i64 = 256;

/// One object kernel copies are read from: the base, and when the copy follows pointers, the offset
/// and every hop but the last; and the argument index on the way, if any.
type ObjectKey = (AddrBase, Option<i32>, Vec<i32>, Option<ArgIndex>);

/// The object a kernel copy reads (its base and every pointer hop but the last) and where in it the
/// copy starts; `None` for copies that are not merged (user memory, strings, tracepoint records).
fn copy_object(c: &CopyRequest) -> Option<(ObjectKey, i64)> {
    if c.kind != MemKind::KernelBytes
        || !matches!(c.addr.base, AddrBase::CurrentTask | AddrBase::Arg(_))
    {
        return None;
    }
    let a = &c.addr;
    Some(match a.derefs.split_last() {
        None => ((a.base, None, Vec::new(), a.index), i64::from(a.offset)),
        Some((last, rest)) => (
            (a.base, Some(a.offset), rest.to_vec(), a.index),
            i64::from(*last),
        ),
    })
}

/// Merges the kernel copies of one object that overlap or lie close together (then, while there
/// are more than [`MAX_COPIES`], the closest remaining ones) into single copies, so that
/// `curthread->pid`, `curthread->real_parent` and `curthread->comm` cost one read, and a load the
/// interpreter makes finds its bytes in one captured range. Other copies keep their order, first.
pub(super) fn merge_kernel_copies(copies: Vec<CopyRequest>) -> Vec<CopyRequest> {
    let mut out = Vec::new();
    let mut groups: Vec<(ObjectKey, Vec<(i64, i64)>)> = Vec::new();
    for c in copies {
        match copy_object(&c) {
            Some((key, start)) => {
                let r = (start, start + i64::from(c.size));
                match groups.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, rs)) => rs.push(r),
                    None => groups.push((key, vec![r])),
                }
            }
            None => out.push(c),
        }
    }
    let fits = |a: (i64, i64), b: (i64, i64)| b.1.max(a.1) - a.0 <= i64::from(MAX_COPY_SIZE);
    for (_, rs) in &mut groups {
        rs.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for &r in rs.iter() {
            match merged.last_mut() {
                Some(m) if r.0 <= m.1 + MERGE_GAP && fits(*m, r) => m.1 = m.1.max(r.1),
                _ => merged.push(r),
            }
        }
        *rs = merged;
    }
    // Still too many: join the closest neighbours while the result stays a legal copy.
    while out.len() + groups.iter().map(|(_, r)| r.len()).sum::<usize>() > MAX_COPIES {
        let best = groups
            .iter()
            .enumerate()
            .flat_map(|(g, (_, rs))| {
                rs.windows(2)
                    .enumerate()
                    .filter(|(_, w)| fits(w[0], w[1]))
                    .map(move |(i, w)| (w[1].0 - w[0].1, g, i))
            })
            .min();
        let Some((_, g, i)) = best else { break };
        let rs = &mut groups[g].1;
        rs[i].1 = rs[i].1.max(rs[i + 1].1);
        rs.remove(i + 1);
    }
    for ((base, offset, hops, index), rs) in groups {
        for (start, end) in rs {
            // Starts and sizes came from i32 offsets and legal sizes.
            let start = i32::try_from(start).unwrap_or(i32::MAX);
            let addr = match offset {
                None => AddrExpr::kernel(base, start, Vec::new()),
                Some(offset) => {
                    let mut derefs = hops.clone();
                    derefs.push(start);
                    AddrExpr::kernel(base, offset, derefs)
                }
            };
            let addr = AddrExpr { index, ..addr };
            out.push(CopyRequest::new(
                addr,
                MemKind::KernelBytes,
                u32::try_from(end - i64::from(start)).unwrap_or(MAX_COPY_SIZE),
            ));
        }
    }
    out
}

//! The entry point of the `provider_needs` fuzz target: arbitrary bytes as one clause, analysed
//! and merged into a capture spec, which must stay within the capture's limits.

use super::policy::DEFAULT_STRING_STORAGE;
use super::program::program_needs;
use super::spec::spec_for;
use crate::capture::spec::{
    MAX_COPIES, MAX_COPY_SIZE, MAX_DEREFS, MAX_STACK_DEPTH, MAX_USER_DEREFS,
};
use crate::capture::AddrBase;
use dtrace_dif::object::DifObject;
use dtrace_dif::program::{ActionKind, ProbeDesc, Program};

/// Fuzz entry point: a clause built from arbitrary bytes (first byte: action kind and argument;
/// then 8-byte integer-table entries up to a count given by the second byte; the rest instruction
/// words) is analysed and merged; nothing may panic and the spec must stay within the capture limits.
pub fn fuzz_entry(data: &[u8]) {
    let (Some(&head), Some(&nint)) = (data.first(), data.get(1)) else {
        return;
    };
    let rest = &data[2..];
    let nint = (usize::from(nint) % 8).min(rest.len() / 8);
    let inttab: Vec<u64> = rest[..nint * 8]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect();
    let text: Vec<u32> = rest[nint * 8..]
        .chunks_exact(4)
        .take(4096)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap_or([0; 4])))
        .collect();
    let obj = DifObject {
        text,
        inttab,
        ..DifObject::default()
    };
    let kind = match head % 3 {
        0 => ActionKind::Stack,
        1 => ActionKind::Ustack,
        _ => ActionKind::DifExpr,
    };
    let action = dtrace_dif::program::ActionDesc {
        kind,
        difo: Some(obj.clone()),
        arg: u64::from(head) << 24,
        uarg: 0,
        ntuple: 0,
    };
    let p = Program {
        ecbs: vec![dtrace_dif::program::EcbDesc {
            probe: ProbeDesc::default(),
            predicate: Some(obj),
            actions: vec![action],
            line: 0,
        }],
        ..Program::default()
    };
    let n = program_needs(&p);
    for (_, c) in &n.clauses {
        assert!(c
            .copies
            .iter()
            .all(|c| (1..=MAX_COPY_SIZE).contains(&c.size)));
        assert!(
            c.kstack.unwrap_or(0) <= MAX_STACK_DEPTH && c.ustack.unwrap_or(0) <= MAX_STACK_DEPTH
        );
        if let Ok(spec) = spec_for(&[c], (&[0, 1, 2], false), DEFAULT_STRING_STORAGE) {
            assert!(spec.copies.len() <= MAX_COPIES);
            // Every copy asked for is one the capture can make.
            assert!(spec.copies.iter().all(|c| c.addr.derefs.len() <= MAX_DEREFS
                && c.addr.user_derefs.len() <= MAX_USER_DEREFS
                && !matches!(c.addr.base, AddrBase::Arg(n) if n >= crate::capture::layout::NARGS)));
            let _ = crate::capture::RecordLayout::for_spec(&spec, "fuzz");
        }
    }
}

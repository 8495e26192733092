//! A probe's capture spec ([`spec_for`]): the union of what every clause enabled on it needs,
//! with the kernel filters its clauses allow (one `pid == N` filter, their predicates), the
//! thread-local mirror's stores, and its kernel copies merged.

use super::clause::ClauseNeeds;
use super::merge::merge_kernel_copies;
use super::mirror;
use super::policy::{CALLER_FRAMES, UCALLER_FRAMES};
use crate::capture::spec::{MAX_COPIES, MAX_COPY_SIZE};
use crate::capture::{AddrExpr, CaptureSpec, CopyRequest, MemKind};
use dtrace_dif::object::DifObject;
use std::collections::HashMap;

/// Merges the needs of the clauses matching a probe into one capture spec. `string_args` are the
/// probe's arguments that are user string pointers (used when a clause's `copyinstr` address could
/// not be resolved to one argument); `kernel_args` says the probe's arguments are kernel values
/// (`fbt`), so a string read at an argument's value (`stringof(arg0)`) is a kernel string the
/// probe copies, as `stringof` of any kernel address.
pub fn spec_for(
    clauses: &[&ClauseNeeds],
    args: (&[usize], bool),
    strsize: u32,
) -> Result<CaptureSpec, String> {
    match spec_or_kernel_only(clauses, args, strsize)? {
        (spec, None) => Ok(spec),
        (_, Some(why)) => Err(format!("not yet supported: {why}")),
    }
}

/// [`spec_for`], but a spec whose copies or `d_path()` walks are more than a probe takes, or
/// that a clause reads where the capture cannot copy (`ClauseNeeds::unsupported`), comes back
/// without them, with why (`more than 8 distinct memory copies at one probe`, `more than 4
/// d_path() paths at one probe`): its record path then serves no clause, and the probe works only where every clause runs whole in the kernel, whose code
/// reads memory itself (see `CaptureSpec::record_path_lacks`).
pub fn spec_or_kernel_only(
    clauses: &[&ClauseNeeds],
    (string_args, kernel_args): (&[usize], bool),
    strsize: u32,
) -> Result<(CaptureSpec, Option<String>), String> {
    let mut spec = CaptureSpec::new();
    let push = |spec: &mut CaptureSpec, c: CopyRequest| {
        if let Some(old) = spec
            .copies
            .iter_mut()
            .find(|o| o.addr == c.addr && o.kind == c.kind && o.size_arg == c.size_arg)
        {
            old.size = old.size.max(c.size);
        } else {
            spec.copies.push(c);
        }
    };
    let first_pid = clauses.first().and_then(|n| n.filter_pid);
    if clauses.iter().all(|n| n.filter_pid == first_pid) {
        spec.filter_pid = first_pid;
    }
    // Every clause has a predicate: the probe records only when one of them holds.
    let predicates: Option<Vec<DifObject>> = clauses.iter().map(|n| n.predicate.clone()).collect();
    if let Some(predicates) = predicates.filter(|p| !p.is_empty()) {
        spec.filter = Some(crate::capture::KernelFilter {
            predicates,
            strsize,
            ..Default::default()
        });
    }
    // Addresses earlier clauses of the probe store in thread-locals: a later clause's copy of one
    // is made from the address itself (the eBPF runs every clause's store, predicate or not).
    let mut stored_before = HashMap::new();
    for n in clauses {
        for c in &n.copies {
            push(&mut spec, mirror::resolve_stored(&stored_before, c));
        }
        mirror::note_stores(&mut stored_before, n);
        if kernel_args {
            for a in (0..crate::capture::layout::NARGS).filter(|a| n.string_at_args & 1 << a != 0) {
                push(
                    &mut spec,
                    CopyRequest::new(AddrExpr::arg(a), MemKind::KernelString, strsize),
                );
            }
        }
        if n.any_string_arg {
            for &a in string_args {
                push(
                    &mut spec,
                    CopyRequest::new(AddrExpr::arg(a), MemKind::UserString, strsize),
                );
            }
        }
        spec.kstack = spec.kstack.max(n.kstack);
        spec.ustack = spec.ustack.max(n.ustack);
        if n.caller {
            spec.kstack = spec.kstack.max(Some(CALLER_FRAMES));
        }
        if n.ucaller {
            spec.ustack = spec.ustack.max(Some(UCALLER_FRAMES));
        }
        if n.execargs {
            spec.execargs = Some(strsize.clamp(1, MAX_COPY_SIZE));
        }
        spec.uregs |= n.uregs;
        spec.ancestors |= n.ancestors;
        mirror::merge_ops(&mut spec.mirror, &n.mirror);
        for p in &n.paths {
            if !spec.paths.contains(p) {
                spec.paths.push(p.clone());
            }
        }
        spec.exact_vtime |= n.vtimestamp;
    }
    // What a clause reads that the capture cannot copy (`fds[self->fd].fi_pathname`): only the
    // kernel's code, which reads memory itself, can serve it.
    let mut lacks: Vec<String> = Vec::new();
    for why in clauses.iter().filter_map(|n| n.unsupported.as_deref()) {
        let why = why.strip_prefix("not yet supported: ").unwrap_or(why);
        if !lacks.iter().any(|l| l == why) {
            lacks.push(why.to_string());
        }
    }
    if spec.paths.len() > crate::capture::path::MAX_PATHS {
        spec.paths.clear();
        lacks.push(format!(
            "more than {} d_path() paths at one probe",
            crate::capture::path::MAX_PATHS
        ));
    }
    spec.copies = merge_kernel_copies(std::mem::take(&mut spec.copies));
    if spec.copies.len() > MAX_COPIES {
        spec.copies.clear();
        lacks.push(format!(
            "more than {MAX_COPIES} distinct memory copies at one probe"
        ));
    }
    Ok((spec, (!lacks.is_empty()).then(|| lacks.join("; "))))
}

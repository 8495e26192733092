//! The thread-variable mirror: `self->buf = arg1` at `read:entry` then `copyin(self->buf, arg0)` at
//! `read:return` reads an address the return probe's eBPF cannot compute, since it lives in a D
//! thread-local in the framework. The storing probe's eBPF also saves the address in an LRU hash
//! keyed by (thread id, variable id) ([`MirrorOp`]); the reading probe's looks it up
//! ([`AddrBase::ThreadVar`]) and copies from it, recording the
//! address it used. Delivery serves the clause's read from the capture only when that address is
//! the one the interpreter reads, so a mirror that differs from the D variable (a predicate kept
//! the D store from happening) costs a copy, never a wrong result.

use super::address::{Evaluator, Slot};
use super::layout::hdr;
use super::spec::{AddrBase, CaptureSpec, MirrorOp, MAX_MIRROR_OPS};
use crate::bpf::insn::{helper, op, Asm, Label, Size, R0, R1, R10, R2, R3, R4, R7};
use crate::error::Result;

/// Bytes of a mirror key: the thread id (4), then the variable id (4).
pub const KEY_SIZE: u32 = 8;
/// Bytes of a mirror value: the address.
pub const VALUE_SIZE: u32 = 8;

/// Whether `spec` uses the mirror map (saves into it or copies from it).
pub fn uses_mirror(spec: &CaptureSpec) -> bool {
    !spec.mirror.is_empty()
        || spec
            .copies
            .iter()
            .any(|c| matches!(c.addr.base, AddrBase::ThreadVar(_)))
}

/// Why `spec`'s mirror operations cannot be generated, if they cannot.
pub fn check(spec: &CaptureSpec) -> std::result::Result<(), String> {
    if spec.mirror.len() > MAX_MIRROR_OPS {
        return Err(format!(
            "{} thread-local mirrors at one probe, at most {MAX_MIRROR_OPS}",
            spec.mirror.len()
        ));
    }
    for m in &spec.mirror {
        if let Some(v) = &m.value {
            if !matches!(v.base, AddrBase::Arg(n) if n < super::layout::NARGS)
                && v.base != AddrBase::CurrentTask
            {
                return Err(format!(
                    "a thread-local mirror of an address at {:?}",
                    v.base
                ));
            }
            if v.derefs.len() > super::spec::MAX_DEREFS
                || v.user_derefs.len() > super::spec::MAX_USER_DEREFS
                || v.index.is_some()
            {
                return Err("a thread-local mirror of too long a pointer chain".into());
            }
        }
    }
    Ok(())
}

/// Writes the key of `var` for the record's thread at the stack slot `key`.
fn emit_key(a: &mut Asm, var: u32, key: i16) {
    a.load(Size::W, R1, R7, hdr::TID as i16)
        .store(Size::W, R10, key, R1);
    a.store_imm(Size::W, R10, key + 4, var as i32);
}

/// Loads into r3 the address mirrored for `var` on the record's thread (the record in r7), or
/// jumps to `missing` when there is none. `key` is an 8-byte stack slot.
pub(super) fn emit_lookup(a: &mut Asm, map: i32, var: u32, key: i16, missing: Label) {
    emit_key(a, var, key);
    a.ld_map_fd(R1, map)
        .frame_addr(R2, i32::from(key))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, missing);
    a.load(Size::DW, R3, R0, 0);
}

/// Saves or removes each mirrored variable of the record's thread (the record in r7, filled).
/// `key` and `scratch` are 8-byte stack slots.
pub(super) fn emit_ops(
    a: &mut Asm,
    ops: &[MirrorOp],
    map: i32,
    key: i16,
    scratch: i16,
) -> Result<()> {
    // The address from the record in r7 (its arguments and task), hops read through `scratch`.
    let addresses = Evaluator::new("a thread-local mirror of an address", Slot::stack(scratch));
    for m in ops {
        match &m.value {
            Some(e) => {
                // No thread-local base (`check` refuses them), so always an address.
                addresses.emit(a, e)?;
                a.store(Size::DW, R10, scratch, R3);
                emit_key(a, m.var, key);
                a.ld_map_fd(R1, map)
                    .frame_addr(R2, i32::from(key))
                    .frame_addr(R3, i32::from(scratch))
                    .mov_imm(R4, 0)
                    .call(helper::MAP_UPDATE_ELEM);
            }
            None => {
                emit_key(a, m.var, key);
                a.ld_map_fd(R1, map)
                    .frame_addr(R2, i32::from(key))
                    .call(helper::MAP_DELETE_ELEM);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::spec::{AddrExpr, CopyRequest, MemKind};

    #[test]
    fn specs_say_when_they_use_the_mirror() {
        let mut s = CaptureSpec::new();
        assert!(!uses_mirror(&s));
        s.copies.push(CopyRequest::new(
            AddrExpr::kernel(AddrBase::ThreadVar(3), 0, Vec::new()),
            MemKind::UserString,
            64,
        ));
        assert!(uses_mirror(&s));
        let mut s = CaptureSpec::new();
        s.mirror.push(MirrorOp {
            var: 3,
            value: None,
        });
        assert!(uses_mirror(&s) && check(&s).is_ok());
    }

    /// Calls to `helper` in `insns`.
    fn calls(insns: &[crate::bpf::insn::Insn], helper: i32) -> usize {
        insns
            .iter()
            .filter(|i| i.code == 0x85 && i.src == 0 && i.imm == helper)
            .count()
    }

    #[test]
    fn programs_save_look_up_and_remove() {
        use crate::capture::codegen::{gen_capture, CtxKind, MapFds, ProbeShape};
        use crate::capture::spec::{ArgSource, Identity, SIZED_COPY_CAP};
        use crate::capture::RecordLayout;
        let shape = ProbeShape {
            ctx: CtxKind::RawTracepoint,
            args: vec![ArgSource::RawArg(0), ArgSource::RawArg(1)],
            conditions: Vec::new(),
            identity: Identity::Current,
            task: None,
        };
        let mut maps = MapFds {
            ring: 3,
            drops: 4,
            room: 9,
            pending: None,
            pending_armed: None,
            wakeup: None,
            wake_at_once: false,
            mirror: Some(5),
            vclock: None,
        };
        let gen = |spec: &CaptureSpec, maps: &MapFds| {
            let layout = RecordLayout::for_spec(spec, "p").unwrap();
            gen_capture(&shape, spec, &layout, 1, maps)
        };
        let plain = gen(&CaptureSpec::new(), &maps).unwrap();
        let save = CaptureSpec {
            mirror: vec![MirrorOp {
                var: 1280,
                value: Some(AddrExpr::arg(1)),
            }],
            ..CaptureSpec::new()
        };
        let saving = gen(&save, &maps).unwrap();
        assert_eq!(calls(&saving, helper::MAP_UPDATE_ELEM), 1);
        let mut copy = CopyRequest::new(
            AddrExpr::kernel(AddrBase::ThreadVar(1280), 0, Vec::new()),
            MemKind::UserBytes,
            SIZED_COPY_CAP,
        );
        copy.size_arg = Some(0);
        let read = CaptureSpec {
            copies: vec![copy.clone()],
            mirror: vec![MirrorOp {
                var: 1280,
                value: None,
            }],
            ..CaptureSpec::new()
        };
        let reading = gen(&read, &maps).unwrap();
        // One lookup more than the drop counter's.
        assert_eq!(
            calls(&reading, helper::MAP_LOOKUP_ELEM),
            calls(&plain, helper::MAP_LOOKUP_ELEM) + 1
        );
        assert_eq!(calls(&reading, helper::MAP_DELETE_ELEM), 1);
        // The same copy from an argument, for the cost of the lookup.
        let by_arg = CaptureSpec {
            copies: vec![CopyRequest {
                addr: AddrExpr::arg(1),
                ..copy
            }],
            ..CaptureSpec::new()
        };
        let direct = gen(&by_arg, &maps).unwrap();
        let (store_cost, lookup_cost) = (saving.len() - plain.len(), reading.len() - direct.len());
        eprintln!(
            "instructions: save {store_cost}, look up and remove {lookup_cost} (plain program {})",
            plain.len()
        );
        assert!(
            store_cost <= 16 && lookup_cost <= 32,
            "{store_cost} {lookup_cost}"
        );
        // Without the map, no program.
        maps.mirror = None;
        assert!(gen(&read, &maps).is_err());
        assert!(gen(&save, &maps).is_err());
        assert!(gen(&CaptureSpec::new(), &maps).is_ok());
    }

    #[test]
    fn only_probe_computable_addresses_are_mirrored() {
        let mut s = CaptureSpec::new();
        s.mirror.push(MirrorOp {
            var: 1,
            value: Some(AddrExpr::arg(1)),
        });
        assert!(check(&s).is_ok());
        s.mirror[0].value = Some(AddrExpr::kernel(AddrBase::ThreadVar(2), 0, Vec::new()));
        assert!(check(&s).is_err());
        s.mirror[0].value = Some(AddrExpr::arg(crate::capture::layout::NARGS));
        assert!(check(&s).is_err());
        s.mirror[0].value = Some(AddrExpr::kernel(AddrBase::CurrentTask, 8, vec![0; 9]));
        assert!(check(&s).is_err());
        let s = CaptureSpec {
            mirror: (0..=MAX_MIRROR_OPS as u32)
                .map(|var| MirrorOp { var, value: None })
                .collect(),
            ..CaptureSpec::new()
        };
        assert!(check(&s).is_err());
    }
}

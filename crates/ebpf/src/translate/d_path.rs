//! `d_path(&p)` in translated code: the path of the `struct path` at `p` as Linux's `d_path()`
//! prints it, built at the probe into a D string of `strsize` bytes, as the interpreter has it
//! from the walk the capture program records (its first `strsize - 1` characters). The walk is
//! `crate::dpath`'s, the one the capture program makes, made here into a slot of the string
//! scratch after the result, with the kernel offsets the context gives
//! ([`ProbeContext::path_offsets`](super::ProbeContext::path_offsets)) and ending at the root of
//! the thread the probe's record speaks for (`curthread`); [`crate::dpath::emit_assemble`]
//! then writes the path into the result. Where the probe may loop, the walk's step and the
//! assembly's name are `bpf_loop` callbacks, which the verifier walks once (and the program holds
//! once, however many paths it builds); elsewhere (Linux 6.1, whose verifier counts a callback's
//! frame on top of the probe code's full stack) they are unrolled, some 5,700 instructions a
//! path, so that about four paths fill a probe's program (eBPF's jumps reach 32,767
//! instructions): a probe with more keeps its clauses in dtrace. A path the walk cannot give (an address it cannot
//! read, NULL among them; a pseudo file system whose names are not made up) faults with
//! `DTRACEFLT_BADADDR` at `p`, as the interpreter's `d_path()` faults on a path not recorded.

use super::{Builtin, FaultAddr, Kind, State, Translator, Untranslatable};
use crate::dpath::{assembly_reach, emit_assemble, slot, Steps, Walk, PATH_SLOT};
use crate::insn::{op, Size, R0, R1, R10, R3, R8};
use dtrace_dif::vm::FaultKind;

impl Translator<'_> {
    /// `d_path()` of the address on the tuple stack into `rd` (see the module notes).
    pub(super) fn d_path(
        &mut self,
        pc: usize,
        s: &mut State,
        rd: u8,
    ) -> Result<(), Untranslatable> {
        let refused = super::refusal(pc, "d_path()");
        let offsets = self.ctx.path_offsets().map_err(refused)?;
        let args = self.int_args(pc, s)?;
        let [addr] = args[..] else {
            return Err(Untranslatable::Invalid {
                pc,
                what: format!("d_path() with {} arguments", args.len()),
            });
        };
        let (most, most32) = self.string_bound().map_err(refused)?;
        let width = super::string_scratch_width(self.strsize);
        // The result's slots (as wide as the assembly's copies may reach), then the walk's.
        let result_slots = assembly_reach(most).div_ceil(width).max(1);
        let before = result_slots * width;
        let before32 = i32::try_from(before)
            .ok()
            .filter(|b| i16::try_from(*b).is_ok())
            .ok_or_else(|| refused("strsize too large".into()))?;
        let slots = result_slots + PATH_SLOT.div_ceil(width);
        let buf = self.frame.load_buf();
        // The walk's steps and the path's names in `bpf_loop` callbacks where the probe may
        // loop (the verifier then walks one of each), else unrolled.
        let steps = match self.ctx.loops() {
            Ok(()) => Steps::Looped {
                ctx: buf,
                to_slot: before32,
            },
            Err(_) => Steps::Unrolled,
        };
        let no_path = self.fault_site(pc, FaultKind::BadAddr, FaultAddr::Frame(addr));
        self.scratch_area(pc, slots, buf, width).map_err(refused)?;
        // R0: the task whose root ends the walk.
        self.ctx
            .emit_builtin(&mut self.a, Builtin::Curthread)
            .map_err(refused)?;
        let a = &mut self.a;
        a.load(Size::DW, R8, R10, buf)
            .alu_imm(op::ADD, R8, before32);
        let walk = Walk::begin(a);
        a.store(Size::DW, R8, slot::TASK, R0);
        a.load(Size::DW, R3, R10, addr);
        a.store(Size::DW, R8, slot::ADDR, R3);
        walk.finish(a, &offsets, steps);
        emit_assemble(a, most32, before32, no_path, steps);
        a.load(Size::DW, R1, R10, buf);
        self.put(s, rd, R1, Kind::Scratch);
        Ok(())
    }
}

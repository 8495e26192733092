//! Shared helpers: assemble, verify and run DIF against the fakes.
#![allow(dead_code)]

use dtrace_dif::asm::assemble;
use dtrace_dif::verify::verify;
use dtrace_dif::vm::fake::{FakeContext, FakeMemory};
use dtrace_dif::vm::{Fault, FaultKind, Machine, VarState, VmOptions};
use dtrace_dif::DifObject;

pub struct H {
    pub state: VarState,
    pub m: Machine,
    pub ctx: FakeContext,
    pub mem: FakeMemory,
}

impl H {
    pub fn new() -> H {
        H::with(VmOptions::default())
    }

    pub fn with(opts: VmOptions) -> H {
        let mut m = Machine::new();
        m.begin_firing();
        H {
            state: VarState::new(opts),
            m,
            ctx: FakeContext::new(),
            mem: FakeMemory::new(),
        }
    }

    pub fn obj(src: &str) -> DifObject {
        let o = assemble(src).unwrap_or_else(|e| panic!("assemble: {e}\n{src}"));
        if let Err(e) = verify(&o) {
            panic!("verify: {e}\n{src}");
        }
        o
    }

    pub fn run_obj(&mut self, o: &DifObject) -> Result<u64, Fault> {
        self.m.run(o, &mut self.state, &mut self.ctx, &mut self.mem)
    }

    pub fn run(&mut self, src: &str) -> Result<u64, Fault> {
        let o = H::obj(src);
        self.run_obj(&o)
    }

    /// Runs and reads the result back as a string.
    pub fn run_str(&mut self, src: &str) -> Result<String, Fault> {
        let o = H::obj(src);
        let a = self.run_obj(&o)?;
        let b = self.m.read_string_result(&o, &mut self.mem, a)?;
        Ok(String::from_utf8(b).expect("utf8"))
    }
}

/// Runs `src` in a fresh harness.
pub fn run(src: &str) -> Result<u64, Fault> {
    H::new().run(src)
}

pub fn kind(r: Result<u64, Fault>) -> FaultKind {
    r.expect_err("expected a fault").kind
}

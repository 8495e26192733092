//! In-memory fakes of the probe context and memory, for tests here and in other crates.

use std::collections::{BTreeMap, BTreeSet};

use crate::vars;
use crate::vm::env::{Memory, ProbeContext};
use crate::vm::fault::FaultKind;

/// A probe context whose built-ins are plain fields.
#[derive(Debug, Clone, Default)]
pub struct FakeContext {
    /// `arg0`..`arg9` and `args[]`.
    pub args: Vec<u64>,
    /// Other integer built-ins by `DIF_VAR_*` id (`pid`, `tid`, `timestamp`, ...).
    pub ints: BTreeMap<u32, u64>,
    /// String built-ins by id (`execname`, `probefunc`, ...).
    pub strings: BTreeMap<u32, Vec<u8>>,
    /// Thread key for thread-local variables.
    pub thread: u64,
    /// Next speculation id handed out; 0 means none free.
    pub next_speculation: u64,
    /// Pids the current process descends from (itself included).
    pub ancestors: BTreeSet<u64>,
    /// State of the pseudo-random generator.
    pub seed: u64,
    /// The thread's saved user registers (`uregs[]`); empty for a thread without (a kernel
    /// thread), where every `uregs[]` read faults.
    pub uregs: Vec<u64>,
}

impl FakeContext {
    /// A context for thread 1 of pid 100 named "fake", probe `fake:mod:func:name`.
    pub fn new() -> FakeContext {
        let mut c = FakeContext {
            thread: 1,
            next_speculation: 1,
            seed: 0x2545_f491_4f6c_dd1d,
            ..FakeContext::default()
        };
        c.ints.insert(vars::DIF_VAR_PID, 100);
        c.ints.insert(vars::DIF_VAR_TID, 1);
        c.ancestors.insert(100);
        c.ancestors.insert(1);
        c.strings.insert(vars::DIF_VAR_EXECNAME, b"fake".to_vec());
        c.strings.insert(vars::DIF_VAR_PROBEPROV, b"fake".to_vec());
        c.strings.insert(vars::DIF_VAR_PROBEMOD, b"mod".to_vec());
        c.strings.insert(vars::DIF_VAR_PROBEFUNC, b"func".to_vec());
        c.strings.insert(vars::DIF_VAR_PROBENAME, b"name".to_vec());
        c
    }
}

impl ProbeContext for FakeContext {
    fn int_var(&mut self, id: u32) -> Result<u64, FaultKind> {
        if (vars::DIF_VAR_ARG0..=vars::DIF_VAR_ARG9).contains(&id) {
            let n = (id - vars::DIF_VAR_ARG0) as usize;
            return Ok(self.args.get(n).copied().unwrap_or(0));
        }
        self.ints.get(&id).copied().ok_or(FaultKind::IllOp)
    }

    fn str_var(&mut self, id: u32, out: &mut Vec<u8>) -> Result<(), FaultKind> {
        let s = self.strings.get(&id).ok_or(FaultKind::IllOp)?;
        out.extend_from_slice(s);
        Ok(())
    }

    fn array_var(&mut self, id: u32, index: u64) -> Result<u64, FaultKind> {
        let values = match id {
            vars::DIF_VAR_ARGS => &self.args,
            vars::DIF_VAR_UREGS => &self.uregs,
            _ => return Err(FaultKind::IllOp),
        };
        usize::try_from(index)
            .ok()
            .and_then(|i| values.get(i).copied())
            .ok_or(FaultKind::IllOp)
    }

    fn thread_key(&mut self) -> u64 {
        self.thread
    }

    fn speculation(&mut self) -> u64 {
        let id = self.next_speculation;
        if id != 0 {
            self.next_speculation = id.wrapping_add(1);
        }
        id
    }

    fn progenyof(&mut self, pid: u64) -> bool {
        self.ancestors.contains(&pid)
    }

    fn random(&mut self) -> u64 {
        // xorshift64*
        let mut x = self.seed;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.seed = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Kernel and user memory made of byte regions at fixed addresses.
#[derive(Debug, Clone, Default)]
pub struct FakeMemory {
    /// Kernel regions by start address.
    pub kernel: BTreeMap<u64, Vec<u8>>,
    /// User regions by start address.
    pub user: BTreeMap<u64, Vec<u8>>,
    /// Whether user writes are allowed (destructive actions enabled).
    pub writable: bool,
    /// Paths `d_path()` gives, by the address of their `struct path`.
    pub paths: BTreeMap<u64, Vec<u8>>,
}

fn find(regions: &BTreeMap<u64, Vec<u8>>, addr: u64, len: usize) -> Option<(u64, usize)> {
    let (&base, bytes) = regions.range(..=addr).next_back()?;
    let off = usize::try_from(addr - base).ok()?;
    let end = off.checked_add(len)?;
    (end <= bytes.len()).then_some((base, off))
}

impl FakeMemory {
    /// Empty memory.
    pub fn new() -> FakeMemory {
        FakeMemory::default()
    }
}

impl Memory for FakeMemory {
    fn read_kernel(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        let (base, off) = find(&self.kernel, addr, buf.len()).ok_or(FaultKind::BadAddr)?;
        buf.copy_from_slice(&self.kernel[&base][off..off + buf.len()]);
        Ok(())
    }

    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> Result<(), FaultKind> {
        let (base, off) = find(&self.user, addr, buf.len()).ok_or(FaultKind::BadAddr)?;
        buf.copy_from_slice(&self.user[&base][off..off + buf.len()]);
        Ok(())
    }

    fn write_user(&mut self, addr: u64, data: &[u8]) -> Result<(), FaultKind> {
        if !self.writable {
            return Err(FaultKind::UPriv);
        }
        let (base, off) = find(&self.user, addr, data.len()).ok_or(FaultKind::BadAddr)?;
        let region = self.user.get_mut(&base).ok_or(FaultKind::BadAddr)?;
        region[off..off + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn d_path(&mut self, path: u64) -> Result<Vec<u8>, FaultKind> {
        self.paths.get(&path).cloned().ok_or(FaultKind::BadAddr)
    }
}

//! Reading the kernel now, from the calling thread: a small raw tracepoint program run on demand with
//! `BPF_PROG_TEST_RUN` copies kernel memory at an address into a map and records the calling thread's
//! `struct task_struct *`. This serves the probes that fire in `dtrace` itself (BEGIN and END): in
//! DTrace they run in the consumer's thread, so `curthread` is that thread and `curthread->comm` reads
//! its task at that moment, which is exactly what a run of this program in that thread sees.
//!
//! [`LiveMemory`] is the [`Memory`] such a firing reads: kernel reads through the program (up to
//! [`CHUNK`] bytes a run), user reads from this process's own memory, and `d_path()` of this
//! process's working or root directory or of one of its open files (`cwd`, `root`,
//! `fds[n].fi_pathname` in BEGIN and END) from the kernel's own rendering of them in
//! `/proc/self` (`cwd`, `root`, `fd/N`), matched by the address of the `struct path`. It is not used for events of
//! other threads: their memory is captured at their probes (see [`crate::capture`]).

use crate::bpf::insn::{helper, op, Asm, Size, R0, R1, R10, R2, R3, R6, R7};
use crate::bpf::{Map, MapKind, ProgKind, Program};
use crate::error::{LinuxError, Result};
use dtrace_dif::vm::{FaultKind, Memory};
use std::fs::File;
use std::os::unix::fs::FileExt;

/// The most bytes one run of the reader copies.
pub const CHUNK: usize = 4096;
/// Map value: i64 result of the read, u64 task pointer, then the bytes.
const HDR: usize = 16;

/// The on-demand kernel reader: its program and the map it writes to.
#[derive(Debug)]
pub struct KernelReader {
    map: Map,
    prog: Program,
}

fn reader_program(map_fd: i32) -> Result<Vec<crate::bpf::insn::Insn>> {
    let mut a = Asm::new();
    let out = a.label();
    const KEY: i16 = -8;
    a.mov(R6, R1);
    a.store_imm(Size::W, R10, KEY, 0);
    a.ld_map_fd(R1, map_fd)
        .frame_addr(R2, i32::from(KEY))
        .call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(op::JEQ, R0, 0, out).mov(R7, R0);
    a.call(helper::GET_CURRENT_TASK).store(Size::DW, R7, 8, R0);
    // ctx[0]: address, ctx[1]: size (at most CHUNK).
    a.load(Size::DW, R3, R6, 0).load(Size::DW, R2, R6, 8);
    a.store_imm(Size::DW, R7, 0, -libc::EINVAL);
    a.jmp_imm(op::JGT, R2, CHUNK as i32, out);
    a.mov(R1, R7).alu_imm(op::ADD, R1, HDR as i32);
    a.call(helper::PROBE_READ_KERNEL).store(Size::DW, R7, 0, R0);
    a.bind(out).mov_imm(R0, 0).exit();
    Ok(a.finish()?)
}

impl KernelReader {
    /// Loads the reader and runs it once to check that this kernel can run it on demand.
    pub fn new() -> Result<KernelReader> {
        let map = Map::create(MapKind::Array, "dt_live", 4, (HDR + CHUNK) as u32, 1)?;
        let insns = reader_program(map.raw_fd())?;
        let prog = Program::load(
            ProgKind::RawTracepoint,
            &insns,
            "dt_live",
            "the kernel reader",
        )?;
        let r = KernelReader { map, prog };
        r.current_task()?;
        Ok(r)
    }

    /// Runs the program for `size` bytes at `addr`; returns the map value.
    fn run(&self, addr: u64, size: usize) -> Result<Vec<u8>> {
        self.prog.test_run_raw_tp(&[addr, size as u64])?;
        self.map
            .lookup(&0u32.to_ne_bytes())?
            .ok_or_else(|| LinuxError::Asm("the kernel reader's map has no entry".into()))
    }

    /// The calling thread's `struct task_struct *`.
    pub fn current_task(&self) -> Result<u64> {
        let v = self.run(0, 0)?;
        Ok(u64::from_ne_bytes(v[8..16].try_into().unwrap_or([0; 8])))
    }

    /// Copies kernel memory at `addr` into `buf` (any length, in runs of [`CHUNK`] bytes);
    /// a bad-address fault when any part of it cannot be read.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), FaultKind> {
        const BAD: FaultKind = FaultKind::BadAddr;
        for (i, part) in buf.chunks_mut(CHUNK).enumerate() {
            let at = addr.checked_add((i * CHUNK) as u64).ok_or(BAD)?;
            let v = self.run(at, part.len()).map_err(|_| BAD)?;
            let res = i64::from_ne_bytes(v[..8].try_into().map_err(|_| BAD)?);
            if res != 0 {
                return Err(BAD);
            }
            part.copy_from_slice(v.get(HDR..HDR + part.len()).ok_or(BAD)?);
        }
        Ok(())
    }
}

/// The memory BEGIN and END read: the kernel now (through a [`KernelReader`]) and this process.
pub struct LiveMemory {
    reader: KernelReader,
    own: Option<File>,
    /// The offsets `d_path()` needs, read from the kernel's BTF at its first use.
    paths: Option<Option<crate::capture::path::PathOffsets>>,
}

impl LiveMemory {
    /// Memory served by `reader`.
    pub fn new(reader: KernelReader) -> LiveMemory {
        LiveMemory {
            reader,
            own: File::open("/proc/self/mem").ok(),
            paths: None,
        }
    }

    fn pointer(&self, addr: u64) -> std::result::Result<u64, FaultKind> {
        let mut b = [0u8; 8];
        self.reader.read(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// The `/proc/self` link whose target is the path of the `struct path` at `path`: the
    /// working or root directory, or an open file's.
    fn proc_link(&mut self, path: u64) -> std::result::Result<String, FaultKind> {
        const BAD: FaultKind = FaultKind::BadAddr;
        let o = *self.paths.get_or_insert_with(|| {
            crate::btf::TaskOffsets::from_vmlinux()
                .ok()
                .and_then(|t| t.paths)
        });
        let o = o.ok_or(BAD)?;
        let task = self.reader.current_task().map_err(|_| BAD)?;
        let fs = self.pointer(task + u64::from(o.task_fs))?;
        if fs != 0 && path == fs + u64::from(o.fs_pwd) {
            return Ok("/proc/self/cwd".into());
        }
        if fs != 0 && path == fs + u64::from(o.fs_root) {
            return Ok("/proc/self/root".into());
        }
        let files = self.pointer(task + u64::from(o.task_files))?;
        let fdt = self.pointer(files + u64::from(o.files_fdt))?;
        let array = self.pointer(fdt + u64::from(o.fdt_fd))?;
        let mut max = [0u8; 4];
        self.reader.read(fdt + u64::from(o.fdt_max_fds), &mut max)?;
        let max = u64::from(u32::from_ne_bytes(max));
        let dir = std::fs::read_dir("/proc/self/fd").map_err(|_| BAD)?;
        for fd in dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        {
            if fd >= max {
                continue;
            }
            let file = self.pointer(array + 8 * fd)?;
            if file != 0 && path == file + u64::from(o.f_path) {
                return Ok(format!("/proc/self/fd/{fd}"));
            }
        }
        Err(BAD)
    }
}

impl Memory for LiveMemory {
    fn read_kernel(&mut self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), FaultKind> {
        self.reader.read(addr, buf)
    }

    fn read_user(&mut self, addr: u64, buf: &mut [u8]) -> std::result::Result<(), FaultKind> {
        let f = self.own.as_ref().ok_or(FaultKind::BadAddr)?;
        f.read_exact_at(buf, addr).map_err(|_| FaultKind::BadAddr)
    }

    fn write_user(&mut self, _addr: u64, _data: &[u8]) -> std::result::Result<(), FaultKind> {
        Err(FaultKind::UPriv)
    }

    fn d_path(&mut self, path: u64) -> std::result::Result<Vec<u8>, FaultKind> {
        use std::os::unix::ffi::OsStrExt;
        let link = self.proc_link(path)?;
        let target = std::fs::read_link(link).map_err(|_| FaultKind::BadAddr)?;
        Ok(target.as_os_str().as_bytes().to_vec())
    }
}

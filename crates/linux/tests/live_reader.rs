//! The on-demand kernel reader (`dtrace_linux::live`): run in the calling thread, it gives that
//! thread's task and reads kernel memory now (root and BPF; skipped otherwise).

mod common;
use dtrace_dif::vm::Memory;
use dtrace_linux::btf::{Btf, TaskOffsets};
use dtrace_linux::live::{KernelReader, LiveMemory};

fn task_pid(reader: &KernelReader, task: u64, btf: &Btf) -> u32 {
    let id = btf.struct_id("task_struct").expect("task_struct in BTF");
    let off = btf.member_offset(id, "pid").expect("task_struct.pid");
    let mut b = [0u8; 4];
    reader
        .read(task + u64::from(off), &mut b)
        .expect("read pid");
    u32::from_ne_bytes(b)
}

#[test]
fn reader_sees_the_calling_thread_and_reads_its_task() {
    if !common::kernel_ok("reader_sees_the_calling_thread_and_reads_its_task") {
        return;
    }
    let btf = Btf::load_vmlinux().expect("vmlinux BTF");
    let offs = TaskOffsets::from_btf(&btf).expect("task offsets");
    let reader = KernelReader::new().expect("kernel reader");
    let me = reader.current_task().expect("task");
    // The kernel half: 0xffff8... with 4-level page tables, 0xff... with 5-level ones (LA57).
    assert!(me >= 0xff00_0000_0000_0000, "{me:#x}");
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() } as u32;
    assert_eq!(task_pid(&reader, me, &btf), tid);
    // tgid: this process.
    let mut b = [0u8; 4];
    reader
        .read(me + u64::from(offs.tgid), &mut b)
        .expect("read tgid");
    assert_eq!(u32::from_ne_bytes(b), std::process::id());
    // Another thread has another task, whose pid is its tid.
    let other = std::thread::spawn(|| {
        let r = KernelReader::new().expect("kernel reader");
        // SAFETY: as above.
        (r.current_task().expect("task"), unsafe { libc::gettid() }
            as u32)
    })
    .join()
    .expect("thread");
    assert_ne!(other.0, me);
    assert_eq!(task_pid(&reader, other.0, &btf), other.1);
    // Reads longer than one run are assembled; a read of an unmapped address fails.
    let mut big = vec![0u8; 3 * dtrace_linux::live::CHUNK + 5];
    reader.read(me, &mut big).expect("long read");
    assert!(reader.read(0x10, &mut b).is_err());
    // As memory: kernel reads through the reader, user reads from this process.
    let mut m = LiveMemory::new(reader);
    let mut k = [0u8; 4];
    m.read_kernel(me + u64::from(offs.tgid), &mut k)
        .expect("kernel");
    assert_eq!(u32::from_ne_bytes(k), std::process::id());
    let local = *b"user bytes";
    let mut u = [0u8; 10];
    m.read_user(local.as_ptr() as u64, &mut u).expect("user");
    assert_eq!(&u, &local);
    assert!(m.read_kernel(0x10, &mut k).is_err());
}

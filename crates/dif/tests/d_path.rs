//! `d_path()`: the path of a `struct path` comes from the memory (what the probe captured), is cut to
//! `strsize`, and faults at the address when the memory cannot give it.

mod common;
use common::H;
use dtrace_dif::vm::{FaultKind, VmOptions};

fn src(addr: u64) -> String {
    format!(
        ".rtype string\nflushts\nsetx {addr:#x}, %r1\nsetx 0x10, %r2\npushtr int, %r2, %r1\n\
         call d_path, %r3\nret %r3\n"
    )
}

#[test]
fn d_path_number_and_name() {
    use dtrace_dif::subr::Subr;
    assert_eq!(Subr::from_name("d_path"), Some(Subr::DPath));
    assert_eq!(Subr::DPath as u16, 58);
    // illumos' toupper keeps 44 (Oracle's number for d_path).
    assert_eq!(Subr::from_u16(44), Some(Subr::Toupper));
}

#[test]
fn d_path_reads_the_memory_path() {
    let mut h = H::new();
    h.mem
        .paths
        .insert(0xffff_8880_0000_1040, b"/tmp/x y/file (deleted)".to_vec());
    assert_eq!(
        h.run_str(&src(0xffff_8880_0000_1040)).unwrap(),
        "/tmp/x y/file (deleted)"
    );
}

#[test]
fn d_path_is_cut_to_strsize() {
    let mut h = H::with(VmOptions {
        strsize: 8,
        ..VmOptions::default()
    });
    h.mem.paths.insert(0x1000, b"/usr/lib/x86_64".to_vec());
    assert_eq!(h.run_str(&src(0x1000)).unwrap(), "/usr/li");
}

#[test]
fn d_path_faults_without_a_path() {
    let mut h = H::new();
    let f = h.run(&src(0x2000)).unwrap_err();
    assert_eq!(f.kind, FaultKind::BadAddr);
    assert_eq!(f.addr, 0x2000);
    let f = h.run(&src(0)).unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0));
}

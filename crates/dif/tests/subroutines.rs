//! Every subroutine through `call`, with edge cases.

mod common;
use common::{kind, H};
use dtrace_dif::vm::{FaultKind, VmOptions};

/// An argument: a string literal (pushed by reference) or an integer (by value).
enum A<'a> {
    S(&'a str),
    I(i64),
    /// An integer pushed by reference with a size (a pointer to memory).
    P(u64, u64),
}

fn call_src(name: &str, args: &[A<'_>], rtype: &str) -> String {
    let mut s = format!(".rtype {rtype}\nflushts\n");
    for (i, a) in args.iter().enumerate() {
        let r = i % 6 + 1;
        match a {
            A::S(t) => s.push_str(&format!("sets \"{t}\", %r{r}\npushtr string, %r0, %r{r}\n")),
            A::I(v) => s.push_str(&format!(
                "setx {:#x}, %r{r}\npushtv int, %r{r}\n",
                *v as u64
            )),
            A::P(p, n) => s.push_str(&format!(
                "setx {p:#x}, %r{r}\nsetx {n:#x}, %r7\npushtr int, %r7, %r{r}\n"
            )),
        }
    }
    s.push_str(&format!("call {name}, %r1\nret %r1\n"));
    s
}

fn int(h: &mut H, name: &str, args: &[A<'_>]) -> Result<u64, dtrace_dif::vm::Fault> {
    h.run(&call_src(name, args, "int 8"))
}

fn st(h: &mut H, name: &str, args: &[A<'_>]) -> Result<String, dtrace_dif::vm::Fault> {
    h.run_str(&call_src(name, args, "string"))
}

fn s(name: &str, args: &[A<'_>]) -> String {
    st(&mut H::new(), name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn i(name: &str, args: &[A<'_>]) -> i64 {
    int(&mut H::new(), name, args).unwrap_or_else(|e| panic!("{name}: {e}")) as i64
}

use A::*;

#[test]
fn strlen_strjoin_substr() {
    assert_eq!(i("strlen", &[S("hello")]), 5);
    assert_eq!(i("strlen", &[S("")]), 0);
    assert_eq!(s("strjoin", &[S("foo"), S("bar")]), "foobar");
    assert_eq!(s("strjoin", &[S(""), S("")]), "");
    assert_eq!(s("substr", &[S("hello"), I(1), I(3)]), "ell");
    assert_eq!(s("substr", &[S("hello"), I(-3)]), "llo");
    assert_eq!(s("substr", &[S("hello"), I(10)]), "");
    // strjoin exactly at a string's storage: 3 + 4 chars + NUL = 8 fits in 8 bytes; a longer
    // result is cut to 7 characters (DTrace for Linux caps it at strsize), not a fault.
    let mut h = H::with(VmOptions {
        strsize: 8,
        ..Default::default()
    });
    assert_eq!(
        st(&mut h, "strjoin", &[S("abc"), S("defg")]).unwrap(),
        "abcdefg"
    );
    assert_eq!(
        st(&mut h, "strjoin", &[S("abcd"), S("efgh")]).unwrap(),
        "abcdefg"
    );
    // strlen is bounded by the characters a string holds.
    assert_eq!(int(&mut h, "strlen", &[S("0123456789")]), Ok(7));
}

#[test]
fn searching() {
    let mut h = H::new();
    // strchr/strrchr return pointers into the string.
    let base = int(&mut h, "strchr", &[S("hello"), I(0)]).unwrap();
    assert_ne!(base, 0);
    assert_eq!(s("strchr", &[S("hello"), I(b'l' as i64)]), "llo");
    assert_eq!(s("strrchr", &[S("hello"), I(b'l' as i64)]), "lo");
    assert_eq!(i("strchr", &[S("hello"), I(b'z' as i64)]), 0);
    assert_eq!(s("strstr", &[S("hello"), S("ll")]), "llo");
    assert_eq!(i("strstr", &[S("hello"), S("x")]), 0);
    assert_eq!(s("strstr", &[S("hello"), S("")]), "hello");
    assert_eq!(i("index", &[S("hello"), S("l")]), 2);
    assert_eq!(i("index", &[S("hello"), S("l"), I(3)]), 3);
    assert_eq!(i("index", &[S("hello"), S("x")]), -1);
    assert_eq!(i("rindex", &[S("hello"), S("l")]), 3);
    assert_eq!(i("rindex", &[S("hello"), S("l"), I(2)]), 2);
    assert_eq!(i("rindex", &[S(""), S("")]), 0);
}

#[test]
fn strtok_continues_across_calls_and_clauses() {
    let mut h = H::new();
    assert_eq!(st(&mut h, "strtok", &[S(",,a,b,,c"), S(",")]).unwrap(), "a");
    let next = ".rtype string\nflushts\npushtv int, %r0\nsets \",\", %r1\npushtr string, %r0, %r1\ncall strtok, %r2\nret %r2\n";
    assert_eq!(h.run_str(next).unwrap(), "b");
    assert_eq!(h.run_str(next).unwrap(), "c");
    assert_eq!(h.run(next), Ok(0));
    // Missing delimiters: the whole string is one token.
    assert_eq!(s("strtok", &[S("abc"), S(",")]), "abc");
    assert_eq!(i("strtok", &[S(",,,"), S(",")]), 0);
    // After the end, and on the first call of a firing, strtok(NULL, ...) is NULL (DTrace's saved
    // position is 0 then), not a fault.
    assert_eq!(h.run(next), Ok(0));
    h.m.begin_firing();
    assert_eq!(h.run(next), Ok(0));
    // A NULL delimiter string still faults.
    let null_delims = "flushts\npushtv int, %r0\npushtv int, %r0\ncall strtok, %r2\nret %r2\n";
    assert_eq!(kind(h.run(null_delims)), FaultKind::BadAddr);
    // A string expression that is NULL (`strtok(strstr(a, b), d)`, pushed by reference) is read,
    // as DTrace for Linux does, and faults at address 0: only the NULL pointer value continues.
    let null_string = "flushts\npushtr string, %r0, %r0\nsets \",\", %r1\npushtr string, %r0, %r1\ncall strtok, %r2\nret %r2\n";
    let f = h.run(null_string).unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0));
}

#[test]
fn conversions() {
    assert_eq!(s("lltostr", &[I(-42)]), "-42");
    assert_eq!(s("lltostr", &[I(255), I(16)]), "0xff");
    assert_eq!(s("lltostr", &[I(0)]), "0");
    assert_eq!(
        kind(int(&mut H::new(), "lltostr", &[I(1), I(1)])),
        FaultKind::IllOp
    );
    assert_eq!(i("strtoll", &[S("  -123")]), -123);
    assert_eq!(i("strtoll", &[S("0x1f"), I(16)]), 31);
    assert_eq!(i("strtoll", &[S("z"), I(36)]), 35);
    assert_eq!(i("strtoll", &[S("")]), 0);
    assert_eq!(
        kind(int(&mut H::new(), "strtoll", &[S("1"), I(37)])),
        FaultKind::IllOp
    );
    assert_eq!(s("toupper", &[S("aBc1")]), "ABC1");
    assert_eq!(s("tolower", &[S("AbC1")]), "abc1");
    assert_eq!(s("toupper", &[S("")]), "");
}

#[test]
fn paths() {
    assert_eq!(s("basename", &[S("/usr/lib/libc.so")]), "libc.so");
    assert_eq!(s("dirname", &[S("/usr/lib/libc.so")]), "/usr/lib");
    assert_eq!(s("basename", &[S("")]), ".");
    assert_eq!(s("dirname", &[S("file")]), ".");
    assert_eq!(s("cleanpath", &[S("/a/./b//../c")]), "/a/c");
}

#[test]
fn byte_order() {
    assert_eq!(i("htons", &[I(0x1234)]), 0x3412);
    assert_eq!(i("ntohs", &[I(0x1234)]), 0x3412);
    assert_eq!(i("htonl", &[I(0x12345678)]), 0x78563412);
    assert_eq!(i("ntohl", &[I(0x12345678)]), 0x78563412);
    assert_eq!(i("htonll", &[I(0x0102030405060708)]), 0x0807060504030201);
    assert_eq!(i("ntohll", &[I(0x0102030405060708)]), 0x0807060504030201);
}

#[test]
fn network_and_uuid() {
    let mut h = H::new();
    h.mem.kernel.insert(0x1000, vec![127, 0, 0, 1]);
    let mut v6 = vec![0u8; 16];
    v6[15] = 1;
    h.mem.kernel.insert(0x2000, v6);
    h.mem.kernel.insert(0x3000, (0u8..16).collect());
    assert_eq!(st(&mut h, "inet_ntoa", &[I(0x1000)]).unwrap(), "127.0.0.1");
    assert_eq!(
        st(&mut h, "inet_ntop", &[I(2), I(0x1000)]).unwrap(),
        "127.0.0.1"
    );
    assert_eq!(st(&mut h, "inet_ntop", &[I(10), I(0x2000)]).unwrap(), "::1");
    assert_eq!(st(&mut h, "inet_ntoa6", &[I(0x2000)]).unwrap(), "::1");
    // An IPv4-compatible address: a dotted quad alone, or with its prefix when strict.
    let mut compat = vec![0u8; 16];
    compat[12..].copy_from_slice(&[127, 0, 0, 1]);
    h.mem.kernel.insert(0x4000, compat);
    assert_eq!(st(&mut h, "inet_ntoa6", &[I(0x4000)]).unwrap(), "127.0.0.1");
    assert_eq!(
        st(&mut h, "inet_ntoa6", &[I(0x4000), I(0)]).unwrap(),
        "127.0.0.1"
    );
    assert_eq!(
        st(&mut h, "inet_ntoa6", &[I(0x4000), I(1)]).unwrap(),
        "::127.0.0.1"
    );
    assert_eq!(
        st(&mut h, "inet_ntop", &[I(10), I(0x4000)]).unwrap(),
        "::127.0.0.1"
    );
    assert_eq!(
        kind(int(&mut h, "inet_ntop", &[I(99), I(0x1000)])),
        FaultKind::IllOp
    );
    assert_eq!(
        kind(int(&mut h, "inet_ntoa", &[I(0x9000)])),
        FaultKind::BadAddr
    );
    assert_eq!(
        st(&mut h, "uuidstr", &[I(0x3000)]).unwrap(),
        "03020100-0504-0706-0809-0a0b0c0d0e0f"
    );
}

#[test]
fn link_layer_addresses() {
    let mut h = H::new();
    h.mem
        .kernel
        .insert(0x1000, vec![0, 0x10, 0xe0, 0x8a, 0x71, 0x5e, 0xee, 0xee]);
    h.mem.kernel.insert(0x2000, (0x10u8..0x24).collect());
    assert_eq!(
        st(&mut h, "link_ntop", &[I(1), I(0x1000)]).unwrap(),
        "00:10:e0:8a:71:5e"
    );
    assert_eq!(
        st(&mut h, "link_ntop", &[I(32), I(0x2000)]).unwrap(),
        "10:11:12:13:14:15:16:17:18:19:1a:1b:1c:1d:1e:1f:20:21:22:23"
    );
    // another hardware type is an illegal operation; an unreadable address a bad one
    assert_eq!(
        kind(int(&mut h, "link_ntop", &[I(-1), I(0x1000)])),
        FaultKind::IllOp
    );
    assert_eq!(
        kind(int(&mut h, "link_ntop", &[I(1), I(0)])),
        FaultKind::BadAddr
    );
}

#[test]
fn user_memory_copies() {
    let mut h = H::new();
    h.mem.user.insert(0x7000, b"user string\0tail".to_vec());
    h.mem.user.insert(0x8000, vec![0u8; 32]);
    assert_eq!(
        st(&mut h, "copyinstr", &[I(0x7000)]).unwrap(),
        "user string"
    );
    // A length limit counts bytes, the NUL among them (DTrace for Linux's copyinstr(a, 5) gives
    // four characters).
    assert_eq!(st(&mut h, "copyinstr", &[I(0x7000), I(5)]).unwrap(), "user");
    assert_eq!(st(&mut h, "copyinstr", &[I(0x7000), I(0)]).unwrap(), "");
    let p = int(&mut h, "copyin", &[I(0x7000), I(4)]).unwrap();
    let o = common::H::obj("ret %r0\n");
    assert_eq!(h.m.read_result(&o, &mut h.mem, p, 4).unwrap(), b"user");
    // copyin() copies into the alloca area: reading past what it copied is an invalid size
    // (DTrace for Linux's alloca bounds).
    assert_eq!(
        h.m.read_result(&o, &mut h.mem, p, 8).unwrap_err().kind,
        FaultKind::BadSize
    );
    assert_eq!(
        kind(int(&mut h, "copyin", &[I(0x9000), I(4)])),
        FaultKind::BadAddr
    );
    // copyinto writes into scratch allocated with alloca.
    let src = "flushts\nsetx 8, %r1\npushtv int, %r1\ncall alloca, %r2\nflushts\nsetx 0x7000, %r3\npushtv int, %r3\npushtv int, %r1\npushtv int, %r2\ncall copyinto, %r4\nldx [%r2], %r5\nret %r5\n";
    assert_eq!(h.run(src), Ok(u64::from_le_bytes(*b"user str")));
    assert_eq!(
        kind(int(&mut h, "copyinto", &[I(0x7000), I(4), I(0x7000)])),
        FaultKind::BadAddr
    );
    // copyout/copyoutstr need writable user memory.
    assert_eq!(
        kind(int(&mut h, "copyoutstr", &[S("hi"), I(0x8000), I(32)])),
        FaultKind::UPriv
    );
    h.mem.writable = true;
    int(&mut h, "copyoutstr", &[S("hi"), I(0x8000), I(32)]).unwrap();
    assert_eq!(&h.mem.user[&0x8000][..3], b"hi\0");
    // A size shorter than the string: that many characters, no NUL (DTrace's copyoutstr).
    int(&mut h, "copyoutstr", &[S("HELLO"), I(0x8000), I(2)]).unwrap();
    assert_eq!(&h.mem.user[&0x8000][..3], b"HE\0");
    int(&mut h, "copyout", &[S("xyz"), I(0x8010), I(3)]).unwrap();
    assert_eq!(&h.mem.user[&0x8000][16..19], b"xyz");
    assert_eq!(
        kind(int(&mut h, "copyout", &[S("xyz"), I(0x8010), I(1 << 30)])),
        FaultKind::BadSize
    );
    // bcopy into scratch.
    let src = ".rtype string\nflushts\nsetx 8, %r1\npushtv int, %r1\ncall alloca, %r2\nflushts\nsets \"bcopy\", %r3\npushtv int, %r3\npushtv int, %r2\nsetx 6, %r1\npushtv int, %r1\ncall bcopy, %r4\nret %r2\n";
    assert_eq!(h.run_str(src).unwrap(), "bcopy");
    assert_eq!(
        kind(int(&mut h, "bcopy", &[S("ab"), I(0x8000), I(2)])),
        FaultKind::BadAddr
    );
}

#[test]
fn memory_helpers() {
    let mut h = H::new();
    h.mem.kernel.insert(0x1000, b"a\0b\0c".to_vec());
    assert_eq!(
        st(&mut h, "memstr", &[I(0x1000), I(b' ' as i64), I(6)]).unwrap(),
        "a b c"
    );
    assert_eq!(int(&mut h, "memstr", &[I(0x1000), I(32), I(0)]), Ok(0));
    // A pointer pushed by reference with its size works the same.
    assert_eq!(
        st(&mut h, "memstr", &[P(0x1000, 5), I(b'-' as i64), I(6)]).unwrap(),
        "a-b-c"
    );
    assert_eq!(
        kind(int(&mut h, "memstr", &[I(0x1000), I(32), I(5000)])),
        FaultKind::IllOp
    );
    let p = int(&mut h, "memref", &[I(0x1234), I(16)]).unwrap();
    let o = common::H::obj("ret %r0\n");
    let b = h.m.read_result(&o, &mut h.mem, p, 16).unwrap();
    assert_eq!(&b[..8], &0x1234u64.to_le_bytes());
    assert_eq!(&b[8..], &16u64.to_le_bytes());
    assert_eq!(kind(int(&mut h, "alloca", &[I(-1)])), FaultKind::NoScratch);
}

#[test]
fn context_subroutines() {
    let mut h = H::new();
    assert_eq!(int(&mut h, "speculation", &[]), Ok(1));
    assert_eq!(int(&mut h, "speculation", &[]), Ok(2));
    assert_eq!(int(&mut h, "progenyof", &[I(1)]), Ok(1));
    assert_eq!(int(&mut h, "progenyof", &[I(555)]), Ok(0));
    let a = int(&mut h, "rand", &[]).unwrap();
    let b = int(&mut h, "rand", &[]).unwrap();
    // 32 random bits, as DTrace for Linux's rand()
    assert!(a <= 0xffff_ffff && b <= 0xffff_ffff && a != b);
    assert_ne!(int(&mut h, "random", &[]), int(&mut h, "random", &[]));
    assert_eq!(int(&mut h, "getmajor", &[I((8 << 20) | 3)]), Ok(8));
    // only the kernel dev_t's 32 bits count (DTrace for Linux)
    assert_eq!(
        int(&mut h, "getmajor", &[I(0xabcd_ef01_2345_6789u64 as i64)]),
        Ok(0x234)
    );
    assert_eq!(int(&mut h, "getminor", &[I((8 << 20) | 3)]), Ok(3));
}

#[test]
fn json_selects() {
    assert_eq!(
        s("json", &[S("{\\\"a\\\":{\\\"b\\\":[1,2]}}"), S("a.b[1]")]),
        "2"
    );
    assert_eq!(i("json", &[S("{\\\"a\\\":1}"), S("b")]), 0);
    assert_eq!(i("json", &[S("not json"), S("a")]), 0);
}

#[test]
fn lock_queries_read_linuxs_mutex_and_rwlock_words() {
    let mut h = H::new();
    let task = 0xffff_8880_0bad_cafe_u64 & !7;
    // A held mutex (its owner word: the task with the waiters flag), a free one.
    h.mem
        .kernel
        .insert(0x1000, (task | 1).to_le_bytes().to_vec());
    h.mem.kernel.insert(0x2000, 0u64.to_le_bytes().to_vec());
    // An rwlock held by three readers, one held by a writer.
    h.mem
        .kernel
        .insert(0x3000, (3u32 << 9).to_le_bytes().to_vec());
    h.mem.kernel.insert(0x4000, 0xffu32.to_le_bytes().to_vec());
    assert_eq!(int(&mut h, "mutex_owned", &[I(0x1000)]), Ok(1));
    assert_eq!(int(&mut h, "mutex_owner", &[I(0x1000)]), Ok(task));
    assert_eq!(int(&mut h, "mutex_owned", &[I(0x2000)]), Ok(0));
    assert_eq!(int(&mut h, "mutex_owner", &[I(0x2000)]), Ok(0));
    assert_eq!(int(&mut h, "mutex_type_adaptive", &[I(0x2000)]), Ok(1));
    assert_eq!(int(&mut h, "mutex_type_spin", &[I(0x1000)]), Ok(0));
    assert_eq!(int(&mut h, "rw_read_held", &[I(0x3000)]), Ok(1));
    assert_eq!(int(&mut h, "rw_write_held", &[I(0x3000)]), Ok(0));
    assert_eq!(int(&mut h, "rw_read_held", &[I(0x4000)]), Ok(0));
    assert_eq!(int(&mut h, "rw_write_held", &[I(0x4000)]), Ok(1));
    assert_eq!(int(&mut h, "rw_iswriter", &[I(0x4000)]), Ok(1));
    // A lock that cannot be read faults at its address, as a load does.
    for name in ["mutex_owned", "mutex_type_spin", "rw_read_held"] {
        let f = int(&mut h, name, &[I(0x9000)]).unwrap_err();
        assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0x9000), "{name}");
    }
}

#[test]
fn solaris_and_freebsd_subroutines_are_unavailable() {
    for name in [
        "msgdsize",
        "msgsize",
        "ddi_pathname",
        "sx_shared_held",
        "sx_exclusive_held",
        "sx_isexclusive",
        "getf",
        "copyoutmbuf",
    ] {
        let f = int(&mut H::new(), name, &[I(0), I(0), I(0)]).unwrap_err();
        assert_eq!(f.kind, FaultKind::IllOp, "{name}");
        assert!(f.detail.contains("not available on Linux"), "{name}");
    }
}

#[test]
fn missing_arguments_and_null_strings_fault() {
    assert_eq!(
        kind(int(&mut H::new(), "strjoin", &[S("a")])),
        FaultKind::IllOp
    );
    // strlen(NULL) faults (DTrace for Linux)
    let f = int(&mut H::new(), "strlen", &[I(0)]).unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0));
    let f = int(&mut H::new(), "toupper", &[I(0)]).unwrap_err();
    assert_eq!((f.kind, f.addr), (FaultKind::BadAddr, 0));
}

#[test]
fn results_are_bounded_by_strsize() {
    let mut h = H::with(VmOptions {
        strsize: 8,
        ..Default::default()
    });
    h.mem.user.insert(0x7000, b"user string\0".to_vec());
    // copyinstr copies the strsize option's bytes (one less than the storage), the NUL among them.
    assert_eq!(st(&mut h, "copyinstr", &[I(0x7000)]).unwrap(), "user s");
    // Other results: at most storage - 1 characters, then the NUL.
    assert_eq!(
        st(&mut h, "toupper", &[S("abcdefghij")]).unwrap(),
        "ABCDEFG"
    );
    assert_eq!(
        st(&mut h, "substr", &[S("abcdefghij"), I(0)]).unwrap(),
        "abcdefg"
    );
    // Inputs are read as strings of at most strsize - 1 characters first.
    assert_eq!(
        st(&mut h, "basename", &[S("/abcdefghij")]).unwrap(),
        "abcdef"
    );
    // lltostr builds all digits; reading the string back is bounded by strsize like any string.
    assert_eq!(st(&mut h, "lltostr", &[I(i64::MIN)]).unwrap(), "-922337");
}

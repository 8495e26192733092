//! The `call` instruction: DIF subroutines (spec ch.10, Tables 10.1-10.2) with DTrace's semantics.
//! Arguments come from the tuple stack; string results are built in scratch. Subroutines tied to
//! Solaris or FreeBSD kernel objects fault with an illegal operation; the lock queries answer for
//! Linux's locks ([`locks`]).

pub mod json;
pub mod locks;
pub mod strfn;

use crate::subr::Subr;
use crate::vm::fault::{Fault, FaultKind};
use crate::vm::interp::{Env, Tuple};
use crate::vm::machine::Machine;

/// Linux `AF_INET`.
pub const AF_INET: u64 = 2;
/// Linux `AF_INET6`.
pub const AF_INET6: u64 = 10;
/// Linux `ARPHRD_ETHER` (`<linux/if_arp.h>`): Ethernet, 6-byte addresses.
pub const ARPHRD_ETHER: u64 = 1;
/// Linux `ARPHRD_INFINIBAND`: IP over InfiniBand, 20-byte addresses.
pub const ARPHRD_INFINIBAND: u64 = 32;
/// Largest `memstr` length (DTrace's `dtrace_memstr_max`).
pub const MEMSTR_MAX: u64 = 4096;
/// Largest size `copyin`/`copyout`/`bcopy` accept in one call.
pub const COPY_MAX: u64 = 1 << 20;

fn illop(detail: &'static str) -> Fault {
    Fault::with_detail(FaultKind::IllOp, 0, detail)
}

/// Minimum number of arguments of each subroutine.
fn min_args(s: Subr) -> usize {
    use Subr::*;
    match s {
        Rand | Speculation | Random => 0,
        Copyin | Strjoin | Strchr | Strrchr | Strstr | Strtok | Substr | Index | Rindex
        | InetNtop | LinkNtop | Memref | Json | Alloca | Bcopy | Bounds => match s {
            Alloca => 1,
            Bcopy => 3,
            _ => 2,
        },
        Copyinto | Copyout | Copyoutstr | Memstr => 3,
        _ => 1,
    }
}

fn unavailable(s: Subr) -> Option<&'static str> {
    use Subr::*;
    Some(match s {
        Msgdsize => "msgdsize is not available on Linux",
        Msgsize => "msgsize is not available on Linux",
        DdiPathname => "ddi_pathname is not available on Linux",
        SxSharedHeld => "sx_shared_held is not available on Linux",
        SxExclusiveHeld => "sx_exclusive_held is not available on Linux",
        SxIsexclusive => "sx_isexclusive is not available on Linux",
        Getf => "getf is not available on Linux",
        CopyoutMbuf => "copyoutmbuf is not available on Linux",
        _ => return None,
    })
}

impl Machine {
    /// Reads string argument `addr` (at most `strsize - 1` bytes).
    fn arg_str(&mut self, env: &mut Env<'_>, addr: u64) -> Result<Vec<u8>, Fault> {
        let mut v = Vec::new();
        self.read_str(env.obj, env.mem, addr, self.opts.strsize - 1, false, &mut v)?;
        Ok(v)
    }

    fn arg_bytes<const N: usize>(
        &mut self,
        env: &mut Env<'_>,
        addr: u64,
    ) -> Result<[u8; N], Fault> {
        let mut b = [0u8; N];
        self.read(env.obj, env.mem, addr, &mut b)?;
        Ok(b)
    }

    /// A string result: copied into scratch (reserving `strsize` bytes, as DTrace does).
    fn ret_str(&mut self, s: &[u8]) -> Result<u64, Fault> {
        let size = self.opts.strsize;
        let n = s.len().min(size - 1);
        let addr = self.alloc(size as u64)?;
        self.scratch_mut(addr, n as u64)?.copy_from_slice(&s[..n]);
        Ok(addr)
    }

    /// Runs subroutine number `n` with the arguments on the tuple stack.
    pub(crate) fn call(&mut self, env: &mut Env<'_>, n: u16, tuple: &Tuple) -> Result<u64, Fault> {
        use Subr::*;
        let s = Subr::from_u16(n).ok_or(illop("unknown subroutine"))?;
        if let Some(why) = unavailable(s) {
            return Err(illop(why));
        }
        let nargs = tuple.top;
        if nargs < min_args(s) {
            return Err(illop("too few subroutine arguments"));
        }
        let regs = tuple.regs;
        let arg = |i: usize| if i < nargs { regs[i].value } else { 0 };
        let strsize = self.opts.strsize;
        match s {
            // DTrace for Linux: 32 random bits (bpf_get_prandom_u32), all of them uniform
            Rand => Ok(env.ctx.random() & 0xffff_ffff),
            Random => Ok(env.ctx.random()),
            // an index (as unsigned: a negative one is out too) below the array's element count
            Bounds if arg(0) < arg(1) => Ok(arg(0)),
            Bounds => Err(Fault::new(FaultKind::BadIndex, arg(0))),
            Speculation => Ok(env.ctx.speculation()),
            Progenyof => Ok(env.ctx.progenyof(arg(0)) as u64),
            MutexOwned | MutexOwner | MutexTypeAdaptive | MutexTypeSpin | RwReadHeld
            | RwWriteHeld | RwIswriter => {
                // The lock's first word, as many bytes as the query reads, zero-extended.
                let mut word = [0u8; 8];
                let n = locks::word_bytes(s).unwrap_or(word.len());
                self.read(env.obj, env.mem, arg(0), &mut word[..n])?;
                Ok(locks::answer(s, u64::from_le_bytes(word)))
            }
            // DTrace for Linux faults on strlen(NULL) as on any other bad address
            Strlen if arg(0) == 0 => Err(Fault::new(FaultKind::BadAddr, 0)),
            Strlen => self.strlen(env, arg(0), strsize - 1).map(|n| n as u64),
            Copyin => {
                let size = arg(1);
                let dst = self.alloca(size)?;
                self.copy_from_user(env, arg(0), dst, size)?;
                Ok(dst)
            }
            Copyinto => {
                let size = arg(1);
                self.scratch_mut(arg(2), size)?;
                self.copy_from_user(env, arg(0), arg(2), size)?;
                Ok(0)
            }
            Copyinstr => {
                // DTrace for Linux's copyinstr(addr [, maxlen]) copies `strsize` bytes (the option's
                // value, one less than a string's storage), or maxlen if less, the NUL among them.
                let mut size = strsize.saturating_sub(1) as u64;
                if nargs > 1 && arg(1) < size {
                    size = arg(1).max(1);
                }
                let dst = self.alloc(size)?;
                if size > 0 {
                    let mut v = Vec::new();
                    self.read_str(env.obj, env.mem, arg(0), size as usize - 1, true, &mut v)?;
                    self.scratch_mut(dst, v.len() as u64)?.copy_from_slice(&v);
                }
                Ok(dst)
            }
            Copyout | Bcopy => {
                let (src, dst, size) = (arg(0), arg(1), arg(2));
                if size > COPY_MAX {
                    return Err(Fault::new(FaultKind::BadSize, size));
                }
                if s == Bcopy {
                    self.scratch_mut(dst, size)?;
                }
                let mut buf = vec![0u8; size as usize];
                self.read(env.obj, env.mem, src, &mut buf)?;
                if s == Bcopy {
                    self.scratch_mut(dst, size)?.copy_from_slice(&buf);
                } else {
                    env.mem
                        .write_user(dst, &buf)
                        .map_err(|k| Fault::new(k, dst))?;
                }
                Ok(0)
            }
            Copyoutstr => {
                // As DTrace: the string and its NUL, at most `size` bytes and D's strsize (so a
                // size shorter than the string writes that many characters and no NUL).
                let (src, dst, size) = (arg(0), arg(1), arg(2));
                let lim = usize::try_from(size).unwrap_or(usize::MAX).min(strsize - 1);
                if lim == 0 {
                    return Ok(0);
                }
                let mut v = Vec::new();
                self.read_str(env.obj, env.mem, src, lim, false, &mut v)?;
                if v.len() < lim {
                    v.push(0);
                }
                env.mem
                    .write_user(dst, &v)
                    .map_err(|k| Fault::new(k, dst))?;
                Ok(0)
            }
            Alloca => self.alloca(arg(0)),
            // Linux's kernel dev_t: 32 bits, the major number above the 20 minor bits
            Getmajor => Ok(u64::from(arg(0) as u32 >> 20)),
            Getminor => Ok(arg(0) & 0xf_ffff),
            Strjoin => {
                let mut a = std::mem::take(&mut self.tmp);
                let mut b = std::mem::take(&mut self.tmp2);
                let mut r = self.read_str(env.obj, env.mem, arg(0), strsize - 1, false, &mut a);
                if r.is_ok() {
                    r = self.read_str(env.obj, env.mem, arg(1), strsize - 1, false, &mut b);
                }
                let res = r.and_then(|_| {
                    // DTrace for Linux caps the joined string at strsize characters.
                    a.extend_from_slice(&b);
                    a.truncate(strsize - 1);
                    // Like DTrace, strjoin consumes only the scratch its result needs.
                    self.put_str(&a)
                });
                self.tmp = a;
                self.tmp2 = b;
                res
            }
            Lltostr => {
                let base = if nargs > 1 { arg(1) } else { 10 };
                let v = strfn::lltostr(arg(0) as i64, base)
                    .ok_or(illop("lltostr base out of range"))?;
                self.put_str(&v)
            }
            Strtoll => {
                let base = if nargs > 1 { arg(1) } else { 10 };
                let v = self.arg_str(env, arg(0))?;
                strfn::strtoll(&v, base)
                    .map(|x| x as u64)
                    .ok_or(illop("strtoll base out of range"))
            }
            DPath => {
                // The path as the probe saw it, cut to strsize as DTrace's d_path buffer is.
                let p = arg(0);
                let v = env.mem.d_path(p).map_err(|k| Fault::new(k, p))?;
                self.ret_str(&v)
            }
            Basename | Dirname => {
                let v = self.arg_str(env, arg(0))?;
                let r = strfn::base_or_dir(&v, s == Dirname, strsize - 1);
                self.ret_str(&r)
            }
            Cleanpath => {
                let v = self.arg_str(env, arg(0))?;
                let r = strfn::cleanpath(&v, strsize);
                self.ret_str(&r)
            }
            Strchr | Strrchr => {
                let v = self.arg_str(env, arg(0))?;
                let c = arg(1) as u8;
                // The NUL is part of the search, as in C.
                let mut with_nul = v;
                with_nul.push(0);
                let pos = if s == Strchr {
                    with_nul.iter().position(|&x| x == c)
                } else {
                    with_nul.iter().rposition(|&x| x == c)
                };
                Ok(pos.map(|p| arg(0).wrapping_add(p as u64)).unwrap_or(0))
            }
            Strstr => {
                let v = self.arg_str(env, arg(0))?;
                let sub = self.arg_str(env, arg(1))?;
                if v.is_empty() && !sub.is_empty() {
                    return Ok(0);
                }
                Ok(strfn::strstr(&v, &sub)
                    .map(|p| arg(0).wrapping_add(p as u64))
                    .unwrap_or(0))
            }
            Index | Rindex => {
                let v = self.arg_str(env, arg(0))?;
                let sub = self.arg_str(env, arg(1))?;
                let pos = (nargs > 2).then(|| arg(2) as i64);
                Ok(strfn::index_of(&v, &sub, pos, s == Rindex) as u64)
            }
            // DTrace for Linux reads a string expression given as the first argument (a NULL one
            // faults); only a pointer value (the `NULL` constant) continues the saved string. A string
            // is pushed by reference (with its size), a pointer by value.
            Strtok if arg(0) == 0 && regs[0].size != 0 => Err(Fault::new(FaultKind::BadAddr, 0)),
            Strtok => self.strtok(env, arg(0), arg(1)),
            Substr => {
                let v = self.arg_str(env, arg(0))?;
                let len = (nargs > 2).then(|| arg(2) as i64);
                let r = strfn::substr(&v, arg(1) as i64, len, strsize);
                self.ret_str(&r)
            }
            Toupper | Tolower => {
                let mut v = self.arg_str(env, arg(0))?;
                if s == Toupper {
                    v.make_ascii_uppercase();
                } else {
                    v.make_ascii_lowercase();
                }
                self.ret_str(&v)
            }
            Htons | Ntohs => Ok((arg(0) as u16).to_be() as u64),
            Htonl | Ntohl => Ok((arg(0) as u32).to_be() as u64),
            Htonll | Ntohll => Ok(arg(0).to_be()),
            InetNtop => match arg(0) {
                AF_INET => {
                    let b = self.arg_bytes::<4>(env, arg(1))?;
                    self.put_str(&strfn::ntoa(&b))
                }
                AF_INET6 => {
                    let b = self.arg_bytes::<16>(env, arg(1))?;
                    self.put_str(&strfn::ntoa6(&b, true))
                }
                _ => Err(illop("inet_ntop address family not AF_INET or AF_INET6")),
            },
            InetNtoa => {
                let b = self.arg_bytes::<4>(env, arg(0))?;
                self.put_str(&strfn::ntoa(&b))
            }
            // DTrace for Linux's optional second argument asks for the strict form of embedded
            // IPv4 addresses (`::ffff:a.b.c.d` rather than `a.b.c.d`).
            InetNtoa6 => {
                let b = self.arg_bytes::<16>(env, arg(0))?;
                self.put_str(&strfn::ntoa6(&b, arg(1) != 0))
            }
            LinkNtop => {
                let len = match arg(0) {
                    ARPHRD_ETHER => 6,
                    ARPHRD_INFINIBAND => 20,
                    _ => {
                        return Err(illop(
                            "link_ntop hardware type not ARPHRD_ETHER or ARPHRD_INFINIBAND",
                        ))
                    }
                };
                let mut b = [0u8; 20];
                self.read(env.obj, env.mem, arg(1), &mut b[..len])?;
                self.put_str(&strfn::link_ntop(&b[..len]))
            }
            Memref => {
                let mut b = [0u8; 16];
                b[..8].copy_from_slice(&arg(0).to_le_bytes());
                b[8..].copy_from_slice(&arg(1).to_le_bytes());
                self.put_bytes(&b)
            }
            Memstr => {
                let (src, c, size) = (arg(0), arg(1) as u8, arg(2));
                if size == 0 {
                    return Ok(0);
                }
                if size > MEMSTR_MAX {
                    return Err(illop("memstr length above 4096"));
                }
                let mut buf = vec![0u8; size as usize - 1];
                self.read(env.obj, env.mem, src, &mut buf)?;
                for b in buf.iter_mut() {
                    if *b == 0 {
                        *b = c;
                    }
                }
                self.put_str(&buf)
            }
            Json => {
                let doc = self.arg_str(env, arg(0))?;
                let sel = self.arg_str(env, arg(1))?;
                match json::json(&doc, &sel) {
                    Some(v) => self.ret_str(&v),
                    None => Ok(0),
                }
            }
            Uuidstr => {
                let b = self.arg_bytes::<16>(env, arg(0))?;
                self.put_str(&strfn::uuidstr(&b))
            }
            _ => Err(illop("subroutine not available on Linux")),
        }
    }

    fn copy_from_user(
        &mut self,
        env: &mut Env<'_>,
        src: u64,
        dst: u64,
        size: u64,
    ) -> Result<(), Fault> {
        let slot = self.scratch_mut(dst, size)?;
        env.mem.read_user(src, slot).map_err(|k| Fault::new(k, src))
    }

    fn strtok(&mut self, env: &mut Env<'_>, addr: u64, delims: u64) -> Result<u64, Fault> {
        let tok = self.arg_str(env, delims)?;
        let mut map = [false; 256];
        for &c in &tok {
            map[c as usize] = true;
        }
        // The input is copied into scratch the first time so later calls in other clauses of this firing
        // can continue from it.
        let (start, end) = if addr == 0 {
            // As DTrace: with no saved position (first call of the firing, or the previous string was
            // used up) strtok(NULL, ...) returns NULL.
            if self.strtok == 0 {
                return Ok(0);
            }
            (self.strtok, self.strtok_end)
        } else {
            let v = self.arg_str(env, addr)?;
            let a = self.put_str(&v)?;
            (a, a + v.len() as u64)
        };
        let bytes: Vec<u8> = {
            let n = end.saturating_sub(start) as usize;
            let mut b = vec![0u8; n];
            self.read(env.obj, env.mem, start, &mut b)?;
            b
        };
        let Some(first) = bytes.iter().position(|&c| !map[c as usize]) else {
            self.strtok = 0;
            self.strtok_end = 0;
            return Ok(0);
        };
        let len = bytes[first..]
            .iter()
            .position(|&c| map[c as usize])
            .unwrap_or(bytes.len() - first);
        let token = bytes[first..first + len].to_vec();
        self.strtok = start + (first + len) as u64;
        self.strtok_end = end;
        self.ret_str(&token)
    }
}

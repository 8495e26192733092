//! Where trace output goes: standard output or `-o file`, switched by `freopen()` actions, and the
//! `system()` action run through the shell after flushing what was printed before it.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;

use dtrace_consumer::consume::Effects;
use dtrace_consumer::{ConsumerError, Result};

/// The output state shared by the writer and the effects.
pub struct OutState {
    stdout: io::Stdout,
    file: Option<File>,
    redirected: Option<File>,
}

impl OutState {
    fn current(&mut self) -> &mut dyn Write {
        match (self.redirected.as_mut(), self.file.as_mut()) {
            (Some(f), _) | (None, Some(f)) => f,
            (None, None) => &mut self.stdout,
        }
    }

    fn current_file(&self) -> Option<&File> {
        self.redirected.as_ref().or(self.file.as_ref())
    }
}

/// A writer over the shared output.
#[derive(Clone)]
pub struct Output(pub Rc<RefCell<OutState>>);

impl Output {
    /// Output to stdout, or appended to `path`.
    pub fn open(path: Option<&str>) -> io::Result<Output> {
        let file = match path {
            Some(p) => Some(OpenOptions::new().create(true).append(true).open(p)?),
            None => None,
        };
        Ok(Output(Rc::new(RefCell::new(OutState {
            stdout: io::stdout(),
            file,
            redirected: None,
        }))))
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().current().write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.borrow_mut().current().flush()
    }
}

impl Effects for Output {
    fn system(&mut self, pending: &mut Vec<u8>, cmd: &[u8]) -> Result<()> {
        self.write_all(pending)?;
        pending.clear();
        self.flush()?;
        // The command's bytes as they are (`\xc0` in a D string is that byte, not UTF-8).
        std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(OsStr::from_bytes(cmd))
            .status()
            .map_err(|e| {
                let cmd = String::from_utf8_lossy(cmd);
                ConsumerError::Io(format!("system(\"{cmd}\"): {e}"))
            })?;
        Ok(())
    }

    fn freopen(&mut self, pending: &mut Vec<u8>, path: &[u8]) -> Result<()> {
        self.write_all(pending)?;
        pending.clear();
        self.flush()?;
        let mut st = self.0.borrow_mut();
        if path.is_empty() {
            st.redirected = None;
            return Ok(());
        }
        match OpenOptions::new()
            .create(true)
            .append(true)
            .open(OsStr::from_bytes(path))
        {
            Ok(f) => {
                st.redirected = Some(f);
                Ok(())
            }
            Err(e) => {
                let path = String::from_utf8_lossy(path);
                eprintln!("dtrace: couldn't freopen() \"{path}\": {e}");
                Ok(())
            }
        }
    }

    fn ftruncate(&mut self, pending: &mut Vec<u8>) -> Result<()> {
        self.write_all(pending)?;
        pending.clear();
        self.flush()?;
        let st = self.0.borrow_mut();
        if let Some(f) = st.current_file() {
            f.set_len(0)?;
        }
        Ok(())
    }
}

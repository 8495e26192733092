//! The running kernel's types: `vmlinux` BTF converted into a parent container once, and each
//! module's split BTF converted on demand into a child container of it. The caller names the
//! directory (normally [`SYS_KERNEL_BTF`]); this module reads only files under it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::btf::{btf_to_ctf, btf_to_ctf_child};
use crate::container::Container;
use crate::error::{CtfError, Result};

/// Where Linux publishes BTF: `vmlinux` and one file per module with BTF.
pub const SYS_KERNEL_BTF: &str = "/sys/kernel/btf";

/// The kernel's type containers.
#[derive(Debug)]
pub struct KernelTypes {
    /// All of `vmlinux`'s types (the parent of every module container).
    pub vmlinux: Arc<Container>,
    vmlinux_btf: Vec<u8>,
    dir: PathBuf,
    modules: Mutex<HashMap<String, Arc<Container>>>,
}

fn read(p: &Path) -> Result<Vec<u8>> {
    std::fs::read(p).map_err(|e| CtfError::Object(format!("{}: {e}", p.display())))
}

impl KernelTypes {
    /// Reads and converts `dir/vmlinux`.
    pub fn load(dir: &Path) -> Result<KernelTypes> {
        let vmlinux_btf = read(&dir.join("vmlinux"))?;
        let vmlinux = Arc::new(btf_to_ctf(&vmlinux_btf)?);
        Ok(KernelTypes {
            vmlinux,
            vmlinux_btf,
            dir: dir.to_path_buf(),
            modules: Mutex::new(HashMap::new()),
        })
    }

    /// Names of the modules that publish BTF.
    pub fn module_names(&self) -> Result<Vec<String>> {
        let rd = std::fs::read_dir(&self.dir)
            .map_err(|e| CtfError::Object(format!("{}: {e}", self.dir.display())))?;
        let mut v: Vec<String> = rd
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n != "vmlinux")
            .collect();
        v.sort();
        Ok(v)
    }

    /// The child container of module `name` (converted on first use, then cached).
    pub fn module(&self, name: &str) -> Result<Arc<Container>> {
        if name.contains('/') || name == "vmlinux" || name.is_empty() {
            return Err(CtfError::Object(format!("bad module name {name:?}")));
        }
        if let Some(c) = self
            .modules
            .lock()
            .map_err(|_| CtfError::Object("module cache poisoned".into()))?
            .get(name)
        {
            return Ok(c.clone());
        }
        let bytes = read(&self.dir.join(name))?;
        let c = Arc::new(btf_to_ctf_child(
            &bytes,
            &self.vmlinux_btf,
            self.vmlinux.clone(),
            "vmlinux",
        )?);
        self.modules
            .lock()
            .map_err(|_| CtfError::Object("module cache poisoned".into()))?
            .insert(name.to_string(), c.clone());
        Ok(c)
    }
}

//! Data read and parsed once while anyone holds it ([`HeldOnce`]): the kernel's BTF, ftrace's
//! list of traceable functions. Their users (planning, enabling, the fbt catalogue) share one
//! parse as long as one of them keeps it, and the memory goes when the last lets go.

use std::sync::{Arc, Mutex, Weak};

/// A value loaded for key `K` and kept while an [`Arc`] of it lives.
pub(crate) struct HeldOnce<K, T> {
    slot: Mutex<Option<(K, Weak<T>)>>,
}

impl<K: PartialEq, T> HeldOnce<K, T> {
    /// Nothing held.
    pub(crate) const fn new() -> Self {
        HeldOnce {
            slot: Mutex::new(None),
        }
    }

    /// The value of `key` someone still holds, or `load`'s, now held by the caller.
    pub(crate) fn get_or_load<E>(
        &self,
        key: K,
        load: impl FnOnce(&K) -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = slot
            .as_ref()
            .filter(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(held);
        }
        let value = Arc::new(load(&key)?);
        *slot = Some((key, Arc::downgrade(&value)));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_loaded_again_only_once_nobody_holds_it() {
        let cache: HeldOnce<u32, String> = HeldOnce::new();
        let mut loads = 0;
        let mut load = |k: &u32| -> Result<String, ()> {
            loads += 1;
            Ok(k.to_string())
        };
        let a = cache.get_or_load(1, &mut load).unwrap();
        let b = cache.get_or_load(1, &mut load).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        // Another key replaces it.
        let c = cache.get_or_load(2, &mut load).unwrap();
        assert_eq!(*c, "2");
        drop((a, b, c));
        let _ = cache.get_or_load(2, &mut load).unwrap();
        assert_eq!(loads, 3);
    }
}

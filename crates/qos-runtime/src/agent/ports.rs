//! Who opened each of the node's data-plane ports: the data plane
//! records the uid of the process that opened a port (its `SO_PEERCRED`) and forgets it
//! when the port closes; the agent's socket consults it before asking the master for
//! bandwidth from that port, so a user the agent serves cannot reserve — and so
//! throttle — a port another user has open, even before that user reserves anything.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// The node's open ports and the uid that opened each; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct PortOwners(Arc<RwLock<HashMap<u16, u32>>>);

impl PortOwners {
    /// `port` was opened by `uid`.
    pub fn opened(&self, port: u16, uid: u32) {
        self.write().insert(port, uid);
    }

    /// `port` was closed.
    pub fn closed(&self, port: u16) {
        self.write().remove(&port);
    }

    /// The uid that has `port` open, if it is open.
    pub fn owner(&self, port: u16) -> Option<u32> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&port)
            .copied()
    }

    /// Whether `uid` may reserve bandwidth from `port`: root always, anyone for a port
    /// nobody has open, otherwise only the uid that opened it.
    pub fn may_reserve(&self, port: u16, uid: u32) -> Result<(), u32> {
        match self.owner(port) {
            Some(owner) if uid != 0 && owner != uid => Err(owner),
            _ => Ok(()),
        }
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<u16, u32>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::PortOwners;

    #[test]
    fn only_the_opener_or_root_may_reserve_an_open_port() {
        let p = PortOwners::default();
        assert_eq!(p.may_reserve(91, 1001), Ok(()), "closed port: anyone");
        p.opened(91, 1000);
        assert_eq!(p.owner(91), Some(1000));
        assert_eq!(p.may_reserve(91, 1000), Ok(()));
        assert_eq!(p.may_reserve(91, 0), Ok(()), "root may");
        assert_eq!(p.may_reserve(91, 1001), Err(1000));
        assert_eq!(p.clone().may_reserve(91, 1001), Err(1000), "clones share");
        p.closed(91);
        assert_eq!(p.may_reserve(91, 1001), Ok(()));
    }
}

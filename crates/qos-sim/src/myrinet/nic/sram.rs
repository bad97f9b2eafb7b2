//! The NIC's SRAM staging area (thesis §4.1: "a small, but fast SRAM ... used to stage
//! data that goes into and out of the network"): the packets (GM) or messages (VIA) a NIC
//! holds between its processor handlers and DMA transfers, referred to by handle.

use crate::myrinet::packet::Packet;

/// A packet or message held in the NIC's SRAM (an index into [`Sram`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Buf(u32);

/// The packets the NIC holds: prepared for sending, waiting to be injected, received
/// and not yet delivered to the host. Handlers and DMA jobs refer to them by [`Buf`].
#[derive(Debug)]
pub(crate) struct Sram<T = Packet> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Sram<T> {
    fn default() -> Self {
        Sram {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Sram<T> {
    #[inline]
    pub(crate) fn put(&mut self, p: T) -> Buf {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(p);
                Buf(i)
            }
            None => {
                self.slots.push(Some(p));
                Buf(self.slots.len() as u32 - 1)
            }
        }
    }

    #[inline]
    pub(crate) fn get(&self, b: Buf) -> &T {
        self.slots[b.0 as usize]
            .as_ref()
            .expect("SRAM buffer used after it was freed")
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, b: Buf) -> &mut T {
        self.slots[b.0 as usize]
            .as_mut()
            .expect("SRAM buffer used after it was freed")
    }

    #[inline]
    pub(crate) fn take(&mut self, b: Buf) -> T {
        let p = self.slots[b.0 as usize]
            .take()
            .expect("SRAM buffer freed twice");
        self.free.push(b.0);
        p
    }
}

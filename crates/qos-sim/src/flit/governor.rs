//! A cap on what each router may spend (PowerHerd): every flit a router
//! moves through its crossbar costs `transit` units, plus `from_hca` when it came from
//! an HCA (its injection); a router whose spending since the last reset would pass its
//! cap moves nothing — its flits wait in its input buffers, and the upstream routers
//! and HCAs stop when their credits run out. A policy sets the caps, reads what was
//! spent and resets it ([`super::hooks::Poster::governor`]); the units are the
//! policy's (picojoules for PowerHerd). The fabric knows nothing of power: without a
//! governor a router step costs one branch.

/// Per-router caps on the cost of the flits moved.
#[derive(Debug, Clone)]
pub struct Governor {
    /// Cost of one flit through a crossbar.
    pub transit: f64,
    /// Extra cost of a flit that came from an HCA.
    pub from_hca: f64,
    /// Per router: spent since the last reset.
    pub spent: Vec<f64>,
    /// Per router: the cap.
    pub cap: Vec<f64>,
    /// Per router: cycles it had flits to move and was held back, since the last reset.
    pub held: Vec<u64>,
    /// Per global input port: fed by an HCA.
    pub(super) from_host: Vec<bool>,
}

impl Governor {
    /// A governor of `routers` routers, every cap `cap`, for a fabric whose HCAs feed
    /// global ports `hca_ports` of `ports` in all.
    pub fn new(
        routers: usize,
        ports: usize,
        hca_ports: &[u32],
        transit: f64,
        from_hca: f64,
        cap: f64,
    ) -> Governor {
        let mut from_host = vec![false; ports];
        for &g in hca_ports {
            if let Some(f) = from_host.get_mut(g as usize) {
                *f = true;
            }
        }
        Governor {
            transit,
            from_hca,
            spent: vec![0.0; routers],
            cap: vec![cap; routers],
            held: vec![0; routers],
            from_host,
        }
    }

    /// What a flit from global input port `gin` costs.
    #[inline]
    pub fn cost(&self, gin: usize) -> f64 {
        if self.from_host.get(gin).copied().unwrap_or(false) {
            self.transit + self.from_hca
        } else {
            self.transit
        }
    }

    /// Whether router `r` may move a flit of cost `c` now.
    #[inline]
    pub fn may(&self, r: usize, c: f64) -> bool {
        self.spent[r] + c <= self.cap[r]
    }

    /// Zeroes what was spent and held.
    pub fn reset(&mut self) {
        self.spent.iter_mut().for_each(|s| *s = 0.0);
        self.held.iter_mut().for_each(|h| *h = 0);
    }
}

//! PowerHerd (Shang, Peh and Jha, ICS 2003; Yum et al.'s [30]) as the paper's
//! comparison for peak power control: the network's peak P_peak is split
//! into per-router power budgets, each router throttles itself to its budget, and
//! neighbouring routers hand each other the budget they do not use.
//!
//! What is modelled: time runs in windows of `window` cycles. A router's budget for a
//! window is energy (pJ) = its share of P_peak × the window's length; every flit it
//! moves through its crossbar costs E_router plus its output link, a flit from its HCA
//! also the HCA's link and energy (the same accounting as peak power control's,
//! [`super::peak::FlitEnergy`], so the budgets sum to the meter's power). A router that
//! has spent its budget moves nothing until the window ends
//! ([`crate::flit::governor::Governor`]): flits of every packet passing through it
//! wait, which is the cost PowerHerd's router-level throttling pays in a wormhole
//! network. At the end of a window every router with budget left hands `share` of it,
//! in equal parts, to those of its neighbours that were held back in the window; the
//! budgets persist from window to window, so budget migrates towards the routers that
//! need it, and their sum stays P_peak × window.
//!
//! What is not: PowerHerd's history-based prediction of the next window's power and
//! its per-port throttling (here the router as a whole is held), and the cost and
//! delay of the exchange messages (here instantaneous, at the window's boundary). The
//! initial split is even.

use crate::flit::governor::Governor;
use crate::flit::topology::{Fabric, Link};

/// The exchange between neighbours.
#[derive(Debug, Clone)]
pub struct Herd {
    /// Cycles per window.
    pub window: u64,
    share: f64,
    /// Each router's neighbours (routers one link away).
    neighbours: Vec<Vec<u32>>,
    /// Windows closed, and router-windows that were held back.
    pub windows: u64,
    pub held_windows: u64,
    /// Budget handed between neighbours in all (pJ).
    pub moved_pj: f64,
}

impl Herd {
    /// The herd of `fab`'s routers, exchanging `share` of spare budget every `window`
    /// cycles.
    pub fn new(fab: &Fabric, window: u64, share: f64) -> Herd {
        let mut neighbours = vec![Vec::new(); fab.routers as usize];
        for (g, l) in fab.link.iter().enumerate() {
            if let Link::Router(gi) = *l {
                let (a, b) = (fab.port_router[g], fab.port_router[gi as usize]);
                if a != b && !neighbours[a as usize].contains(&b) {
                    neighbours[a as usize].push(b);
                }
            }
        }
        Herd {
            window,
            share,
            neighbours,
            windows: 0,
            held_windows: 0,
            moved_pj: 0.0,
        }
    }

    /// Closes a window: routers with budget left give `share` of it to their
    /// neighbours that were held back; what was spent is reset.
    pub fn exchange(&mut self, g: &mut Governor) {
        let n = g.cap.len();
        let needy: Vec<bool> = g.held.iter().map(|&h| h > 0).collect();
        let mut delta = vec![0.0f64; n];
        for r in 0..n {
            let spare = (g.cap[r] - g.spent[r]).max(0.0);
            let takers: Vec<u32> = self.neighbours[r]
                .iter()
                .copied()
                .filter(|&m| needy[m as usize])
                .collect();
            if spare <= 0.0 || takers.is_empty() {
                continue;
            }
            let give = self.share * spare;
            delta[r] -= give;
            for &m in &takers {
                delta[m as usize] += give / takers.len() as f64;
            }
            self.moved_pj += give;
        }
        for (c, d) in g.cap.iter_mut().zip(&delta) {
            *c = (*c + d).max(0.0);
        }
        self.windows += 1;
        self.held_windows += needy.iter().filter(|&&h| h).count() as u64;
        g.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_budget_moves_to_held_neighbours_and_the_total_is_kept() {
        // A 3x3 mesh: router 4 is the centre, 0 a corner.
        let fab = crate::flit::config::TopologySpec::mesh(3).fabric().unwrap();
        let mut h = Herd::new(&fab, 500, 0.5);
        assert_eq!(h.neighbours[4].len(), 4);
        assert_eq!(h.neighbours[0].len(), 2);
        let mut g = Governor::new(9, fab.total_ports(), &fab.hca_port, 1.0, 0.0, 100.0);
        // The centre spent everything and was held back; its neighbours 1, 3, 5, 7
        // spent 20; the corners nothing, but none of their neighbours was held.
        g.spent = vec![0.0, 20.0, 0.0, 20.0, 100.0, 20.0, 0.0, 20.0, 0.0];
        g.held[4] = 3;
        h.exchange(&mut g);
        // Each of 1, 3, 5, 7 gives half its 80 spare to 4 (its only held neighbour).
        assert_eq!(g.cap[4], 100.0 + 4.0 * 40.0);
        for r in [1, 3, 5, 7] {
            assert_eq!(g.cap[r], 60.0);
        }
        for r in [0, 2, 6, 8] {
            assert_eq!(g.cap[r], 100.0);
        }
        assert!((g.cap.iter().sum::<f64>() - 900.0).abs() < 1e-9);
        assert_eq!(h.moved_pj, 160.0);
        // What was spent and held is reset for the next window.
        assert!(g.spent.iter().all(|&s| s == 0.0) && g.held.iter().all(|&x| x == 0));
        // With nobody held, nothing moves.
        h.exchange(&mut g);
        assert_eq!(g.cap[4], 260.0);
        assert_eq!(h.windows, 2);
        assert_eq!(h.held_windows, 1);
    }

    #[test]
    fn a_held_router_shares_with_several_held_neighbours_equally() {
        let fab = crate::flit::config::TopologySpec::mesh(2).fabric().unwrap();
        let mut h = Herd::new(&fab, 100, 1.0);
        let mut g = Governor::new(4, fab.total_ports(), &fab.hca_port, 1.0, 0.0, 10.0);
        // Router 0 idle; its neighbours 1 and 2 both held.
        g.spent = vec![0.0, 10.0, 10.0, 10.0];
        g.held[1] = 1;
        g.held[2] = 1;
        h.exchange(&mut g);
        assert_eq!(g.cap, vec![0.0, 15.0, 15.0, 10.0]);
    }
}

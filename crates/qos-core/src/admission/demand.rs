//! Gang admission: many premium flows admitted together or not at all (a parallel job's
//! flows), decided per resource rather than per flow.
//!
//! A set of flows is first summed into its [`Demand`]: for every limited resource it
//! uses (thesis §3.3.1: the source node, each switch output port on each route, the
//! destination node), the total it would reserve there, with the same costs a single
//! flow pays ([`Ledger::check`]). The set fits if every resource's reservation plus its
//! total stays within capacity — the three criteria of §3.3.1 applied to every flow at
//! once, and the same as admitting the flows one by one: a sum of non-negative amounts
//! stays within a capacity iff the whole sum does. Deciding costs O(resources touched),
//! however many flows; summing costs O(flows × route length) once, routes walked
//! without allocating.
//!
//! A refusal names the first resource short, in the order the flows first touch them,
//! with what is reserved there, what the set adds and the capacity.

use super::resources::{from_milli, Demand, UNLIMITED};
use super::{mb, min_rate, AdmitError, Criterion, Ledger, Rejection, ResourceId, Resources};
use crate::topology::build::MAX_BANDWIDTH;
use crate::topology::{NodeId, RouteError};
use crate::units::Bandwidth;

impl Ledger {
    /// Sums `flows` (source, destination, bandwidth) into their demand. Each flow is
    /// checked as [`Ledger::check`] checks a premium request on its own: a bandwidth
    /// above 0, at most the source NIC's Bmax and at least its slowest pace, and a
    /// route between two different nodes.
    pub fn demand<I>(&self, flows: I) -> Result<Demand, AdmitError>
    where
        I: IntoIterator<Item = (NodeId, NodeId, Bandwidth)>,
    {
        let topo = &self.topo;
        let n = self.res.len();
        let mut total = vec![0u64; n];
        let mut order: Vec<ResourceId> = Vec::new();
        let mut hops = Vec::with_capacity(64);
        let mut count = 0u64;
        let mut add = |r: ResourceId, amount: u64, total: &mut Vec<u64>| {
            let t = &mut total[r.0 as usize];
            if *t == 0 {
                order.push(r);
            }
            *t = t.saturating_add(amount);
        };
        for (src, dst, bandwidth) in flows {
            count += 1;
            for id in [src, dst] {
                if id.0 as usize >= topo.nodes().len() {
                    return Err(RouteError::UnknownNode(id.0).into());
                }
            }
            if src == dst {
                return Err(RouteError::SameNode(topo.node(src).name.clone()).into());
            }
            if bandwidth.is_zero() {
                return Err(AdmitError::ZeroBandwidth);
            }
            let node = topo.node(src);
            if bandwidth > node.rate.bmax || bandwidth > MAX_BANDWIDTH {
                return Err(AdmitError::AboveBmax {
                    node: node.name.clone(),
                    requested: mb(bandwidth),
                    bmax: mb(node.rate.bmax),
                });
            }
            let minimum = min_rate(node.rate);
            if bandwidth < minimum {
                return Err(AdmitError::BelowMinRate {
                    node: node.name.clone(),
                    requested: format!("{} B/s", bandwidth.bytes_per_sec()),
                    minimum: format!("{} B/s", minimum.bytes_per_sec()),
                });
            }
            let b = bandwidth.bytes_per_sec();
            // Node resources and costs as a single flow's (source first, then the
            // route's ports, then the destination).
            let (send, combined_src) = (Resources::send(src), Resources::combined(src));
            let (recv, combined_dst) = (Resources::receive(dst), Resources::combined(dst));
            let cap = &self.res.cap;
            let limited = |r: ResourceId| cap[r.0 as usize] != UNLIMITED;
            if limited(send) {
                add(send, b * 1000, &mut total);
            }
            if limited(combined_src) {
                add(combined_src, b * 1000, &mut total);
            }
            topo.route_into(src, dst, &mut hops)?;
            for &h in &hops {
                let r = self.res.port(topo, h);
                if limited(r) {
                    add(r, b * 1000, &mut total);
                }
            }
            if limited(recv) {
                add(recv, b * 1000, &mut total);
            }
            let cost = topo.node(dst).capacity.receive_cost_permille as u64;
            if limited(combined_dst) && cost > 0 {
                add(combined_dst, b * cost, &mut total);
            }
        }
        Ok(Demand {
            amounts: order
                .into_iter()
                .map(|r| (r, total[r.0 as usize]))
                .collect(),
            flows: count,
        })
    }

    /// The first resource on which `demand` does not fit beside what is reserved now.
    pub fn check_demand(&self, demand: &Demand) -> Result<(), Box<Rejection>> {
        self.first_short(demand, |r| self.reserved[r.0 as usize])
    }

    /// The first resource on which `demand` does not fit even with nothing reserved:
    /// such a set never fits, however long it waits.
    pub fn check_demand_alone(&self, demand: &Demand) -> Result<(), Box<Rejection>> {
        self.first_short(demand, |_| 0)
    }

    fn first_short(
        &self,
        demand: &Demand,
        reserved: impl Fn(ResourceId) -> u64,
    ) -> Result<(), Box<Rejection>> {
        for &(r, add) in &demand.amounts {
            let cap = self.res.cap[r.0 as usize];
            let held = reserved(r);
            if held as u128 + add as u128 > cap as u128 {
                let criterion = match self.res.resource(&self.topo, r) {
                    super::Resource::Port(_) => Criterion::SwitchPort,
                    super::Resource::NodeReceive(_) => Criterion::DestinationNode,
                    _ => Criterion::SourceNode,
                };
                return Err(Box::new(Rejection {
                    criterion,
                    resource: self.res.label(&self.topo, r),
                    resource_id: r,
                    reserved: from_milli(held),
                    requested: from_milli(add),
                    capacity: from_milli(cap),
                }));
            }
        }
        Ok(())
    }

    /// Reserves `demand` if it fits (all of it), else reserves nothing and names the
    /// first resource short. Its resources are marked changed, so best-effort shares
    /// are recomputed around it.
    pub fn reserve(&mut self, demand: &Demand) -> Result<(), Box<Rejection>> {
        self.check_demand(demand)?;
        for &(r, add) in &demand.amounts {
            self.reserved[r.0 as usize] += add;
            self.mark(r);
        }
        Ok(())
    }

    /// Gives back a demand [`Ledger::reserve`] took.
    pub fn unreserve(&mut self, demand: &Demand) {
        for &(r, add) in &demand.amounts {
            let v = &mut self.reserved[r.0 as usize];
            *v = v.saturating_sub(add);
            self.mark(r);
        }
    }
}

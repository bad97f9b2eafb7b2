//! The network's side of a run on threads ([`super::parallel`]): cutting the routers
//! into partitions, the per-thread router views over the shared arrays, the serial
//! phase of each cycle (outboxes, then the HCAs) and the threads' lifetime.

use std::time::Instant;

use qos_core::vlarb::AnyVlArbiter;

use super::engine::Network;
use super::error::FlitError;
use super::hooks::NoHooks;
use super::packet::Packets;
use super::parallel::{Ctx, Part, Pool, ThreadsProfile, Work, START};
use super::records::{Cycle, InVc, Ob, Params, Port, Slot, NEVER};
use super::router::Hot;
use super::stats::{Collector, RunResult};
use super::topology::Fabric;

/// The network's arrays and constants as raw pointers, for the partitions' views.
#[derive(Clone, Copy)]
struct Raw {
    k: Params,
    window: (u64, u64),
    fab: *const Fabric,
    vc: (*mut InVc, usize),
    slot: (*mut Slot, usize),
    port: (*mut Port, usize),
    wait_next: (*mut u32, usize),
    sink: (*const u32, usize),
    rports: (*mut u64, usize),
    listed: (*mut bool, usize),
    va_claim: (*mut u32, usize),
    va_out_rr: (*mut u16, usize),
    tail_out: (*mut u32, usize),
    route_done: (*mut Cycle, usize),
    route_batch: (*mut (Cycle, Cycle), usize),
    hold: (*mut (Cycle, u16), usize),
    in_arb: (*mut AnyVlArbiter, usize),
    out_arb: (*mut AnyVlArbiter, usize),
    class_mask: (*const u32, usize),
    class_lo: (*const u32, usize),
    class_hi: (*const u32, usize),
    class_keep: (*const bool, usize),
    pk: *mut Packets,
    stats: *mut Collector,
    // The output buffers' size and arrays (empty without).
    ob_cap: u32,
    ob_slot: (*mut Slot, usize),
    ob_head: (*mut u8, usize),
    ob_len: (*mut u8, usize),
    ob_waiter: (*mut u32, usize),
    ob_mask: (*mut u32, usize),
    ob_link_rr: (*mut u8, usize),
    ob_listed: (*mut bool, usize),
}

// SAFETY: the pointers are used under the phase discipline of `parallel`.
unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

/// A mutable slice from a pointer and length.
///
/// # Safety
/// As `std::slice::from_raw_parts_mut`, writes confined as in `parallel`.
unsafe fn sl<'x, T>((p, n): (*mut T, usize)) -> &'x mut [T] {
    unsafe { std::slice::from_raw_parts_mut(p, n) }
}

/// A shared slice from a pointer and length.
///
/// # Safety
/// As `std::slice::from_raw_parts`.
unsafe fn sh<'x, T>((p, n): (*const T, usize)) -> &'x [T] {
    unsafe { std::slice::from_raw_parts(p, n) }
}

/// The partitions' work: the network's arrays, the partitions, the shared wheel.
struct Net {
    raw: Raw,
    parts: *mut Part,
    shared: *const Vec<Vec<u32>>,
}

// SAFETY: used under the phase discipline of `parallel`.
unsafe impl Send for Net {}
unsafe impl Sync for Net {}

impl Work for Net {
    unsafe fn phase1(&self, i: usize, now: Cycle) {
        // SAFETY: partition i is this thread's alone during the phase; the shared
        // wheel is only read.
        let (part, shared) = unsafe { (&mut *self.parts.add(i), &*self.shared) };
        part.start();
        // SAFETY: as above.
        let mut h = unsafe { self.raw.hot(part, shared) };
        h.wake(now);
        h.allocate_vcs(now);
        let t = h.tally;
        part.tally = t;
    }

    unsafe fn phase2(&self, i: usize, now: Cycle) {
        // SAFETY: as in phase 1.
        let (part, shared) = unsafe { (&mut *self.parts.add(i), &*self.shared) };
        // SAFETY: as above.
        let mut h = unsafe { self.raw.hot(part, shared) };
        h.step_routers(now);
        let t = h.tally;
        part.tally = t;
        part.wheel_len = t.wheel_len;
    }
}

impl Raw {
    /// The view of partition `part`.
    ///
    /// # Safety
    /// The phase discipline of `parallel`: no two threads write the same record, and
    /// the network is not otherwise used while the view lives.
    unsafe fn hot<'x>(&self, part: &'x mut Part, shared: &'x [Vec<u32>]) -> Hot<'x> {
        // SAFETY: the function's contract.
        unsafe {
            Hot {
                k: self.k,
                window: self.window,
                fab: &*self.fab,
                vc: sl(self.vc),
                slot: sl(self.slot),
                port: sl(self.port),
                wait_next: sl(self.wait_next),
                sink: sh(self.sink),
                rports: sl(self.rports),
                listed: sl(self.listed),
                arb_list: &mut part.arb_list,
                spare_list: &mut part.spare_list,
                wheel: &mut part.wheel,
                reqs: &mut part.reqs,
                va_list: &mut part.va_list,
                va_allowed: &mut part.va_allowed,
                va_claim: sl(self.va_claim),
                va_touched: &mut part.va_touched,
                va_out_rr: sl(self.va_out_rr),
                tail_out: sl(self.tail_out),
                route_done: sl(self.route_done),
                route_batch: sl(self.route_batch),
                hold: sl(self.hold),
                ob: Ob {
                    cap: self.ob_cap,
                    lanes: self.k.lanes,
                    slot: sl(self.ob_slot),
                    head: sl(self.ob_head),
                    len: sl(self.ob_len),
                    waiter: sl(self.ob_waiter),
                    mask: sl(self.ob_mask),
                    link_rr: sl(self.ob_link_rr),
                    listed: sl(self.ob_listed),
                    ports: &mut part.ob_ports,
                },
                in_arb: sl(self.in_arb),
                out_arb: sl(self.out_arb),
                class_mask: sh(self.class_mask),
                class_lo: sh(self.class_lo),
                class_hi: sh(self.class_hi),
                class_keep: sh(self.class_keep),
                pk: &mut *self.pk,
                stats: &mut *self.stats,
                tally: part.tally,
                gov: None,
                lane_map: None,
                hooks: None,
                own_lo: part.vc_lo,
                own_len: part.vc_len,
                heads_in_order: !self.k.separable,
                heads: &mut part.heads,
                shared_wheel: Some(shared),
                outbox: Some(&mut part.outbox),
            }
        }
    }
}

fn raw_mut<T>(v: &mut [T]) -> (*mut T, usize) {
    (v.as_mut_ptr(), v.len())
}

fn raw<T>(v: &[T]) -> (*const T, usize) {
    (v.as_ptr(), v.len())
}

impl Network {
    /// Runs on `n` threads: 1 runs the engine on this thread, as without threads; 2 or
    /// more cut the routers into that many blocks of consecutive routers (rows of a
    /// mesh or torus), each stepped by its own thread. The result is the same for every
    /// `n`, and the same as without threads.
    /// A run driven by a policy or a governor runs on one thread.
    pub fn set_threads(&mut self, n: usize) -> Result<(), FlitError> {
        if n == 0 {
            return Err(FlitError::config("threads", "at least one thread"));
        }
        let routers = self.fab.routers as usize;
        let n = n.min(routers.max(1));
        self.threads = n;
        self.parts.clear();
        self.shared.clear();
        if n < 2 {
            return Ok(());
        }
        let lanes = self.k.lanes;
        let ports = self.port.len();
        let vc_of = |r: usize| {
            if r >= routers {
                ports * lanes
            } else {
                self.fab.port_base[r] as usize * lanes
            }
        };
        for i in 0..n {
            let (r0, r1) = (routers * i / n, routers * (i + 1) / n);
            let (lo, hi) = (vc_of(r0), vc_of(r1));
            self.parts.push(Part {
                vc_lo: lo,
                vc_len: hi - lo,
                wheel: vec![Vec::new(); self.wheel.len()],
                arb_list: Vec::with_capacity(r1 - r0),
                spare_list: Vec::with_capacity(r1 - r0),
                ..Part::default()
            });
        }
        self.shared = vec![Vec::new(); self.wheel.len()];
        Ok(())
    }

    /// Threads of the run (0: not set).
    pub fn threads(&self) -> usize {
        self.threads
    }

    fn raw(&mut self) -> Raw {
        Raw {
            k: self.k,
            window: self.window,
            fab: &self.fab,
            vc: raw_mut(&mut self.vc),
            slot: raw_mut(&mut self.slot),
            port: raw_mut(&mut self.port),
            wait_next: raw_mut(&mut self.wait_next),
            sink: raw(&self.sink),
            rports: raw_mut(&mut self.rports),
            listed: raw_mut(&mut self.listed),
            va_claim: raw_mut(&mut self.va_claim),
            va_out_rr: raw_mut(&mut self.va_out_rr),
            tail_out: raw_mut(&mut self.tail_out),
            route_done: raw_mut(&mut self.route_done),
            route_batch: raw_mut(&mut self.route_batch),
            hold: raw_mut(&mut self.hold),
            in_arb: raw_mut(&mut self.in_arb),
            out_arb: raw_mut(&mut self.out_arb),
            class_mask: raw(&self.class_mask),
            class_lo: raw(&self.class_lo),
            class_hi: raw(&self.class_hi),
            class_keep: raw(&self.class_keep),
            pk: &mut self.pk,
            stats: &mut self.stats,
            ob_cap: self.ob.cap,
            ob_slot: raw_mut(&mut self.ob.slot),
            ob_head: raw_mut(&mut self.ob.head),
            ob_len: raw_mut(&mut self.ob.len),
            ob_waiter: raw_mut(&mut self.ob.waiter),
            ob_mask: raw_mut(&mut self.ob.mask),
            ob_link_rr: raw_mut(&mut self.ob.link_rr),
            ob_listed: raw_mut(&mut self.ob.listed),
        }
    }

    /// The cycle loop with partitions 1 and up on their own threads.
    pub(super) fn run_threads(
        &mut self,
        progress: &mut dyn FnMut(u64),
    ) -> Result<RunResult, FlitError> {
        let pool = Pool::new(self.parts.len());
        let work = Net {
            raw: self.raw(),
            parts: self.parts.as_mut_ptr(),
            shared: &self.shared,
        };
        self.profile = ThreadsProfile::default();
        std::thread::scope(|s| {
            for i in 1..self.parts.len() {
                let (pool, work) = (&pool, &work);
                s.spawn(move || pool.worker(work, i));
            }
            let ctx = Ctx {
                pool: &pool,
                work: &work,
            };
            let r = self.run_cycles::<NoHooks>(progress, None, Some(&ctx));
            pool.stop();
            r
        })
    }

    /// One cycle on threads: phases 1 and 2 on every partition, then the serial phase
    /// (the partitions' outboxes in order, then the HCAs).
    pub(super) fn par_cycle(&mut self, ctx: &Ctx<'_>, now: u64) {
        let n = now as Cycle;
        let t0 = Instant::now();
        ctx.pool.cycle(ctx.work, n);
        let t1 = Instant::now();
        let slot = (n & self.k.wmask) as usize;
        self.tally.wheel_len -= self.shared[slot].len();
        self.shared[slot].clear();
        let mut parts = std::mem::take(&mut self.parts);
        let mut crossings = 0;
        self.with_hot(None, |h, hca| {
            h.tally.now_hint = n;
            for p in parts.iter_mut() {
                let t = p.tally;
                h.tally.in_network -= START - t.in_network;
                h.tally.outstanding -= START - t.outstanding;
                h.tally.flit_hops += t.flit_hops;
                h.tally.moved += t.moved;
                let ob = &mut p.outbox;
                for &(ivc, word, ready) in &ob.push {
                    h.push_flit(ivc as usize, word, ready);
                }
                for &(ivc, at) in &ob.sched {
                    h.schedule(ivc as usize, at);
                }
                for &(word, at) in &ob.deliver {
                    h.deliver(word, at);
                }
                crossings += ob.push.len() + ob.sched.len();
                ob.push.clear();
                ob.sched.clear();
                ob.deliver.clear();
                h.ob.ports.append(&mut p.ob_ports);
            }
            // The links after every crossbar, as without threads.
            h.step_links(n);
            // HCAs after routers: what they push is queued for the next cycle.
            hca.step(h, now);
        });
        self.parts = parts;
        let p = &mut self.profile;
        p.cycles += 1;
        p.parallel_ns += (t1 - t0).as_nanos() as u64;
        p.serial_ns += t1.elapsed().as_nanos() as u64;
        p.crossings += crossings as u64;
    }

    /// Where the time of the last run on threads went (zero for other runs).
    pub fn threads_profile(&self) -> ThreadsProfile {
        self.profile
    }

    /// Drops every pending evaluation (only when the network holds no flit).
    pub(super) fn clear_wheels(&mut self) {
        self.with_hot(None, |h, _| h.clear_wheel());
        for p in &mut self.parts {
            for due in p.wheel.iter_mut() {
                for &ivc in due.iter() {
                    self.vc[ivc as usize].sched = NEVER;
                }
                due.clear();
            }
            p.wheel_len = 0;
        }
    }
}

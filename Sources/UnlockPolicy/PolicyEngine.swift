import StepHistoryStore

/// The unlock policy as a pure state machine: `handle(input, at: now)` updates the state and
/// returns the effects the shell must carry out. It never reads a clock or a file.
///
/// A store is shielded while any owner holds it (the gate until its goal is walked, each
/// running schedule occurrence, a manual lock) and its selection is not empty, unless an
/// emergency unlock suspends it. Windows are measured in elapsed time; see `docs/policy.md`.
public struct PolicyEngine: Sendable {
    /// The configuration in force.
    public private(set) var configuration: PolicyConfiguration
    /// The state to persist.
    public private(set) var state: PolicyState
    /// Fail-closed reasons and other problems, newest last (at most 20).
    public private(set) var problems: [String] = []

    // Derived, not persisted.
    private var resolvers: [String: ZoneResolver] = [:]
    private var activeOccurrences: [String: [Occurrence]] = [:]
    private var scheduleCacheFrom: Int64 = .max
    private var scheduleCacheUntil: Int64 = .min
    private var nextLedgerEvent: Int64 = .min
    private var nextWallEvent: Int64 = .min
    /// The next ledger and wall times at which what the policy holds changes (a window's end, a
    /// schedule boundary, a new day), without the relock warnings due before them.
    private var nextChangeEvents: (ledger: Int64, wall: Int64) = (.max, .max)
    private var lastEvaluationWall: Int64 = .max
    private var needsEvaluation = true
    private var dirty = false
    private var shieldsDirty = true
    private var desired: [String: DesiredStore] = [:]
    private var applied: [String: Set<Target>] = [:]
    private var knownApplied: Set<String> = []
    private var lastWake: Int64?
    private var lastWakeBoot = ""
    /// Whether a window timed in elapsed time (gate, schedule goal, emergency, manual lock) is
    /// running, as of the last evaluation; while one is, the state is saved every minute.
    private var timedWindowRunning = false
    /// The ledger time at which the next checkpoint save is due while a timed window runs (nil:
    /// at once; this engine has not saved yet).
    private var nextCheckpoint: Int64?
    /// Set by a reboot whose wall clock is behind the last saved reading: the amount.
    private var rebootClockBehind: Int64?
    private var retryAt: Int64?
    /// Stores whose shield had failed and that the last reconcile asked for again. The driver
    /// reports a failed apply or remove right after its batch, so when any other input comes
    /// first, the attempt went through: their failure is no longer listed.
    private var retrying: Set<String> = []
    /// While the daily cap refuses a store's gate: the ledger time from which it may not (recheck
    /// from then).
    private var capBlockedUntil: [String: Int64] = [:]
    private var pendingReasons: [String: (reason: String, until: Int64?)] = [:]
    private var notices: [PolicyNotice] = []
    /// The notices of the last batch, sent again if the shell reports that batch failed.
    private var lastNotices: [PolicyNotice] = []
    private var bootID = ""
    private var mono: Int64 = 0
    private var wall: Int64 = 0

    private struct DesiredStore: Sendable, Equatable {
        var owners: [String]
        var suspended: Bool
        var shielded: Bool
    }

    static let retryDelay: Int64 = 10_000
    /// How long before a timed unlock relocks its store a `relockWarning` is given, longest
    /// first: 5 minutes and 1 minute. A window gets only the warnings whose lead is shorter than
    /// the window (a 3-minute unlock gets the 1-minute one, a 1-minute unlock none).
    public static let relockWarningLeads: [Duration] = [.seconds(300), .seconds(60)]
    /// `relockWarningLeads` in milliseconds.
    static let warningLeads: [Int64] = relockWarningLeads.map { $0.components.seconds * 1000 }
    /// The most wall-clock downtime a reboot adds to the ledger beyond the new boot's uptime.
    static let maximumRebootCredit: Int64 = millisPerDay
    static let week: Int64 = 7 * millisPerDay
    /// While a timed window runs, the state is saved at least this often (elapsed time), so a
    /// power cut loses at most this much of the ledger.
    static let checkpointInterval: Int64 = millisPerMinute
    /// How far a new boot's wall clock may read behind the last saved reading (allowing for the
    /// new boot's uptime) before the clock counts as set back: the firmware clock keeps whole
    /// seconds.
    static let rebootClockTolerance: Int64 = 2_000

    /// Creates an engine over a state (fresh by default: every gate locked).
    public init(
        configuration: PolicyConfiguration, state: PolicyState = PolicyState(), systemZone: String? = nil
    ) {
        self.configuration = configuration
        self.state = state
        if let systemZone, timeZoneProblem(systemZone) == nil, state.systemZone == nil {
            self.state.systemZone = systemZone
        }
        pruneStores()
    }

    /// Creates an engine from what a state store loaded. An unusable file starts locked, and
    /// `problems` says why.
    public init(
        configuration: PolicyConfiguration, restoring loaded: Result<PolicyState?, PolicyStateError>,
        systemZone: String? = nil
    ) {
        switch loaded {
        case .success(let state):
            self.init(configuration: configuration, state: state ?? PolicyState(), systemZone: systemZone)
        case .failure(let error):
            self.init(configuration: configuration, state: PolicyState(), systemZone: systemZone)
            problems.append("\(error); started locked")
        }
    }

    // MARK: - Handling inputs

    /// Feeds one input at one instant; returns the effects to carry out, in order.
    public mutating func handle(_ input: PolicyInput, at now: Instant) -> [PolicyEffect] {
        advanceClock(now)
        if case .shieldReport(let store, .failed) = input {
            retrying.remove(store)
        } else if !retrying.isEmpty {
            for store in retrying { clearShieldProblem(store) }
            retrying.removeAll()
        }
        var skipReconcile = false
        var answering: EffectFailure?
        switch input {
        case .steps(let count):
            if count > 0 {
                if needsEvaluation || state.ledger >= nextLedgerEvent || wall >= nextWallEvent
                    || wall < lastEvaluationWall
                {
                    evaluate()
                }
                countSteps(count)
            }
        case .tick:
            break
        case .command(let command):
            if needsEvaluation { evaluate() }
            run(command)
        case .zoneChanged(let identifier):
            if let problem = timeZoneProblem(identifier) {
                notices.append(PolicyNotice(kind: .refused, reason: "time zone change ignored: \(problem)"))
            } else if state.systemZone != identifier {
                state.systemZone = identifier
                dirty = true
                invalidateSchedules()
                notices.append(
                    PolicyNotice(
                        kind: .zoneChanged,
                        reason: "system time zone is now \(identifier); schedules re-evaluated"))
            }
        case .shieldReport(let store, let report):
            switch report {
            case .applied(let selection):
                applied[store] = selection.targets
                knownApplied.insert(store)
                shieldsDirty = true
                clearShieldProblem(store)
            case .failed(let reason):
                knownApplied.remove(store)
                applied[store] = nil
                shieldsDirty = true
                skipReconcile = true
                retryAt = mono + Self.retryDelay
                addProblem("shield for \(store) failed: \(reason); retrying")
                notices.append(
                    PolicyNotice(
                        kind: .shieldFailed, store: store, reason: "\(reason); retrying on the next tick"))
            }
        case .effectFailed(let failure):
            // Notices come after `persist` and `wakeUp`, so the failed batch's were dropped.
            notices.insert(contentsOf: lastNotices, at: 0)
            switch failure {
            case .wakeUp(let reason): failClosed("could not arm the relock: \(reason)")
            case .persist(let reason):
                failClosed("could not save the state: \(reason)")
                dirty = true  // not saved: try again with the next input
            }
            // The shell dropped the rest of the failed batch, which may have held an `apply`, a
            // `remove` or the wake-up: nothing in it can be assumed done. Forget what the shields
            // are known to have applied (the answer applies every required target again; shields
            // are idempotent) and ask for the wake-up again with the next batch.
            applied.removeAll()
            knownApplied.removeAll()
            shieldsDirty = true
            lastWake = nil
            answering = failure
        }
        if needsEvaluation || state.ledger >= nextLedgerEvent || wall >= nextWallEvent
            || wall < lastEvaluationWall
        {
            evaluate()
        }
        // A checkpoint: while a timed window runs, save at least once a minute of elapsed time,
        // so a power cut (or a firmware clock set back) loses at most a minute of the ledger.
        if timedWindowRunning, state.ledger >= nextCheckpoint ?? .min { dirty = true }
        var shieldEffects: [PolicyEffect] = []
        if shieldsDirty && !skipReconcile {
            shieldEffects = reconcile()
        }
        var effects: [PolicyEffect] = []
        // The answer to a failed effect never saves (the save is retried with the next input;
        // no unlock window is running then), and the answer to a failed wake-up arms none (the
        // shell's minute tick stands in until the next input arms it). So the shell and the
        // engine cannot answer each other forever, and at most one answer in a row can fail:
        // the shields of the last one are always carried out.
        if dirty && answering == nil {
            effects.append(.persist(state))
            dirty = false
            nextCheckpoint = state.ledger + Self.checkpointInterval
        }
        if !isWakeUpFailure(answering), let wake = nextWake(), wake != lastWake || bootID != lastWakeBoot {
            lastWake = wake
            lastWakeBoot = bootID
            effects.append(.wakeUp(at: dateFromMillis(wall + wake - mono), monotonic: .milliseconds(wake)))
        }
        lastNotices = notices
        if !notices.isEmpty {
            for notice in notices { effects.append(.notify(notice)) }
            notices.removeAll(keepingCapacity: true)
        }
        if !shieldEffects.isEmpty { effects += shieldEffects }
        return effects
    }

    private func isWakeUpFailure(_ failure: EffectFailure?) -> Bool {
        if case .wakeUp = failure { return true }
        return false
    }

    /// What the policy holds at `now` (as if a `.tick` arrived then), for `stepgate status`.
    public func status(at now: Instant) -> PolicyStatus {
        var copy = self
        _ = copy.handle(.tick, at: now)
        return copy.currentStatus()
    }

    // MARK: - Clock

    /// Wall readings are kept within years 1–9000 and boot-clock readings within ±9·10¹⁴ ms, so
    /// every sum of a reading and a window stays far from overflow and every state still encodes
    /// to a file that decodes (ISO 8601 years have four digits).
    static let wallRange: ClosedRange<Int64> = -62_135_596_800_000...221_845_392_000_000
    static let monoRange: ClosedRange<Int64> = -900_000_000_000_000...900_000_000_000_000

    private mutating func advanceClock(_ instant: Instant) {
        let w = min(max(instant.wallMillis, Self.wallRange.lowerBound), Self.wallRange.upperBound)
        let m = min(max(instant.monoMillis, Self.monoRange.lowerBound), Self.monoRange.upperBound)
        if let last = state.lastSeen {
            if last.bootID == instant.bootID {
                let delta = max(0, m - last.mono)
                state.ledger = min(state.ledger + delta, Self.monoRange.upperBound)
                let expected = last.wall + delta
                if abs(w - expected) > 1000 {
                    needsEvaluation = true
                    dirty = true  // save the new reading: a reboot measures its gap from it
                    capBlockedUntil.removeAll()
                    notices.append(
                        PolicyNotice(
                            kind: .clockJumped,
                            reason: "wall clock moved \(w > expected ? "forward" : "back") by "
                                + "\(formatDuration(abs(w - expected))); windows keep their elapsed length"))
                }
            } else {
                // A reboot: the boot clock restarted. Real time elapsed is at least the new boot's
                // uptime; the wall clock is the only other evidence, and the firmware clock can be
                // set by anyone at the keyboard, so it may add at most a day beyond the uptime.
                let uptime = max(0, m)
                let gap = w - last.wall
                let credit: Int64
                if gap < uptime - Self.rebootClockTolerance {
                    // The wall clock reads earlier than the last save plus the new uptime: it was
                    // set back while the machine was down. The time powered off cannot be
                    // measured; only the uptime is credited, and running unlocks end (below).
                    credit = uptime
                    rebootClockBehind = uptime - gap
                } else {
                    credit = max(uptime, min(gap, m + Self.maximumRebootCredit))
                }
                state.ledger = min(state.ledger + credit, Self.monoRange.upperBound)
                // What the wall clock credited beyond the uptime restrains nothing until a
                // synchronized clock proves it (see `PolicyState.unproven`).
                state.pendingProof = nil
                if credit > uptime && !instant.clockSynchronized {
                    state.unproven = min(state.unproven + (credit - uptime), state.ledger)
                    state.pendingProof = PendingProof(
                        lastWall: last.wall, bootID: instant.bootID, amount: credit - uptime)
                }
                // The machine may have run for up to a checkpoint interval after the last save,
                // and a clock set back by less than the time it was off hides that: charge the
                // running unlock windows for whatever part of that interval the credit beyond
                // the uptime does not cover, so repeated reboots cannot add up.
                chargeUnlockWindows(max(0, Self.checkpointInterval - (credit - uptime)))
                needsEvaluation = true
                dirty = true  // save the new boot's reading at once
                applied.removeAll()
                knownApplied.removeAll()
                shieldsDirty = true
            }
        } else {
            needsEvaluation = true
        }
        if state.lastSeen?.bootID == instant.bootID {
            state.lastSeen?.wall = w
            state.lastSeen?.mono = m
        } else {
            state.lastSeen = SeenClock(wall: w, mono: m, bootID: instant.bootID)
        }
        bootID = instant.bootID
        mono = m
        wall = w
        if instant.clockSynchronized, let proof = state.pendingProof, proof.bootID == instant.bootID {
            // The clock is now right: the time powered off was the wall gap less this boot's
            // uptime. Up to the credit given, it is proven.
            let off = min(max(0, w - proof.lastWall - m), proof.amount)
            state.unproven = max(0, state.unproven - off)
            state.pendingProof = nil
            needsEvaluation = true
            dirty = true
        }
        if let behind = rebootClockBehind {
            rebootClockBehind = nil
            let moved = "wall clock is \(formatDuration(behind)) behind the last saved reading after a reboot"
            notices.append(
                PolicyNotice(
                    kind: .clockJumped,
                    reason: "\(moved); the time powered off cannot be measured, so running unlocks end"))
            if unlockWindowRunning { failClosed("\(moved) (time powered off cannot be measured)") }
        }
    }

    /// Elapsed time as far as it is proven: what ages restraints (manual locks, the daily cap,
    /// the emergency allowance), so a reboot with the firmware clock set forward cannot end them.
    private var restraintLedger: Int64 { state.ledger - state.unproven }

    /// Makes every running unlock window (gate, schedule goal, emergency) `charge` ms older.
    /// Manual locks are not charged (that would shorten them).
    private mutating func chargeUnlockWindows(_ charge: Int64) {
        guard charge > 0 else { return }
        for name in Array(state.stores.keys) {
            guard var s = state.stores[name] else { continue }
            s.gate.window?.startLedger -= charge
            s.emergency?.window.startLedger -= charge
            for (id, o) in s.occurrences where o.window != nil {
                s.occurrences[id]?.window?.startLedger -= charge
            }
            if state.stores[name] != s { state.stores[name] = s }
        }
    }

    /// Whether an unlock window (gate, schedule goal, emergency) is running in the state.
    private var unlockWindowRunning: Bool {
        state.stores.values.contains { s in
            s.gate.window != nil || s.emergency != nil || s.occurrences.values.contains { $0.window != nil }
        }
    }

    // MARK: - Zones and schedules

    private func zoneIdentifier(for schedule: ScheduleConfiguration?) -> String {
        schedule?.timeZone ?? configuration.timeZone ?? state.systemZone ?? "UTC"
    }

    private mutating func resolver(for schedule: ScheduleConfiguration?) -> ZoneResolver {
        let id = zoneIdentifier(for: schedule)
        if let r = resolvers[id] { return r }
        let r = ZoneResolver(identifier: id)
        resolvers[id] = r
        return r
    }

    private mutating func invalidateSchedules() {
        scheduleCacheUntil = .min
        capBlockedUntil.removeAll()
        needsEvaluation = true
    }

    private mutating func refreshSchedules() {
        guard wall >= scheduleCacheUntil || wall < scheduleCacheFrom else { return }
        var until = Int64.max
        activeOccurrences.removeAll(keepingCapacity: true)
        for store in configuration.stores {
            var list: [Occurrence] = []
            for schedule in store.schedules {
                let r = resolver(for: schedule)
                if let o = schedule.occurrence(containing: wall, resolver: r) { list.append(o) }
                if let b = schedule.nextBoundary(after: wall, resolver: r) { until = min(until, b) }
            }
            if !list.isEmpty { activeOccurrences[store.name] = list }
        }
        scheduleCacheFrom = wall
        scheduleCacheUntil = until
    }

    // MARK: - Evaluation

    /// Expires windows, follows schedules, and recomputes which owners hold which store.
    private mutating func evaluate() {
        needsEvaluation = false
        lastEvaluationWall = wall
        refreshSchedules()
        rollDay()
        var ledgerEvent = Int64.max
        var wallEvent = scheduleCacheUntil
        let ledger = state.ledger

        for store in configuration.stores {
            let name = store.name
            var s = state.stores[name] ?? StoreState()
            if state.stores[name] == nil { dirty = true }
            if store.gate != nil, s.gate.lockedSince == nil {
                s.gate.lockedSince = wall
                dirty = true
            }
            if let w = s.gate.window, w.remaining(ledger: ledger, wall: wall) <= 0 {
                s.gate = GateState(lockedSince: wall)
                dirty = true
                pendingReasons["\(name)|gate"] = (
                    "unlock window of \(formatDuration(w.length)) ended; walk again to unlock", nil
                )
            }
            if let lock = s.manualLock, lock.window.remaining(ledger: restraintLedger, wall: wall) <= 0 {
                s.manualLock = nil
                dirty = true
                pendingReasons["\(name)|lock:\(lock.by)"] = (
                    "lock of \(formatDuration(lock.window.length)) ended", nil
                )
            }
            if let e = s.emergency, e.window.remaining(ledger: ledger, wall: wall) <= 0 {
                s.emergency = nil
                dirty = true
                notices.append(
                    PolicyNotice(
                        kind: .emergencyEnded, store: name, owner: nil,
                        reason: "emergency unlock by \(e.by) ended; owners hold the store again"))
            }
            let active = activeOccurrences[name] ?? []
            for (id, var o) in s.occurrences {
                if o.end <= wall || !active.contains(where: { $0.id == id }) {
                    s.occurrences[id] = nil
                    dirty = true
                    continue
                }
                if let w = o.window, w.remaining(ledger: ledger, wall: wall) <= 0 {
                    o.window = nil
                    o.steps = 0
                    s.occurrences[id] = o
                    dirty = true
                    pendingReasons["\(name)|schedule:\(id)"] = (
                        "unlock of \(formatDuration(w.length)) within the window ended", o.end
                    )
                }
            }
            for o in active {
                guard let schedule = store.schedules.first(where: { $0.name == o.schedule }),
                    schedule.goal != nil
                else { continue }
                if s.occurrences[o.id] == nil {
                    s.occurrences[o.id] = OccurrenceState(end: o.end)
                    dirty = true
                }
            }
            // Daily-cap and audit records older than two days are no longer needed.
            if let first = s.unlocks.first, restraintLedger - first.ledger > 2 * millisPerDay {
                s.unlocks.removeAll { restraintLedger - $0.ledger > 2 * millisPerDay }
                dirty = true
            }
            if let w = s.gate.window { note(w, &ledgerEvent, &wallEvent) }
            if let w = s.manualLock?.window { note(w, &ledgerEvent, &wallEvent, offset: state.unproven) }
            if let w = s.emergency?.window { note(w, &ledgerEvent, &wallEvent) }
            for o in s.occurrences.values {
                if let w = o.window { note(w, &ledgerEvent, &wallEvent) }
            }
            if state.stores[name] != s { state.stores[name] = s }
        }
        for (id, until) in state.skips {
            if until <= wall {
                state.skips[id] = nil
                dirty = true
            } else {
                wallEvent = min(wallEvent, until)
            }
        }
        if let first = state.emergencyUses.first, restraintLedger - first.stamp.ledger > 30 * millisPerDay {
            let now = restraintLedger
            state.emergencyUses.removeAll { now - $0.stamp.ledger > 30 * millisPerDay }
            dirty = true
        }
        // Every running timed window noted its ledger end.
        timedWindowRunning = ledgerEvent != .max
        if hasDailyGoals, let today = state.today {
            // Wake at the day's end, so status and the household show the new day's goal.
            ledgerEvent = min(ledgerEvent, today.endsLedger + state.unproven)
        }
        nextLedgerEvent = ledgerEvent
        nextWallEvent = wallEvent
        nextChangeEvents = (ledgerEvent, wallEvent)
        updateDesired()
        warnBeforeRelocks()
    }

    // MARK: - Relock warnings

    /// One running unlock window of a store, as a candidate for the store's relock.
    private enum UnlockWindow: Hashable {
        case gate
        case occurrence(String)
        case emergency

        var owner: String? {
            switch self {
            case .gate: "gate"
            case .occurrence(let id): "schedule:\(id)"
            case .emergency: nil
            }
        }
    }

    /// Warns before a timed unlock relocks a store that is open now: finds the first window end
    /// at which the store would be shielded again (nothing else changing), gives the warning due
    /// for it (the shortest lead already reached that is not done), marks it done in the state
    /// (so a restart neither repeats nor loses it), and asks to be evaluated at the next lead.
    private mutating func warnBeforeRelocks() {
        let ledger = state.ledger
        for store in configuration.stores where !store.selection.isEmpty {
            guard desired[store.name]?.shielded == false, let s = state.stores[store.name] else { continue }
            var windows: [(window: UnlockWindow, remaining: Int64)] = []
            if let w = s.gate.window { windows.append((.gate, w.remaining(ledger: ledger, wall: wall))) }
            for id in s.occurrences.keys.sorted() {
                if let w = s.occurrences[id]?.window {
                    windows.append((.occurrence(id), w.remaining(ledger: ledger, wall: wall)))
                }
            }
            if let e = s.emergency {
                windows.append((.emergency, e.window.remaining(ledger: ledger, wall: wall)))
            }
            windows.removeAll { $0.remaining <= 0 }
            guard !windows.isEmpty else { continue }
            windows.sort { $0.remaining < $1.remaining }
            var relock: Int64?
            for candidate in windows {
                if shielded(store, s, after: candidate.remaining) {
                    relock = candidate.remaining
                    break
                }
            }
            guard let relock else { continue }
            let deciding = windows.filter { $0.remaining == relock }.map(\.window)
            var covered = deciding.map { timedWindow($0, in: s)?.coveredLead ?? 0 }.min() ?? 0
            if let lead = Self.warningLeads.last(where: { $0 < covered && relock <= $0 }) {
                for window in deciding { markWarned(window, store: store.name, lead: lead) }
                covered = lead
                dirty = true
                let first = deciding[0]
                let what: String
                switch first {
                case .gate: what = "the unlock"
                case .occurrence(let id): what = "the unlock within \(id)"
                case .emergency: what = "the emergency unlock"
                }
                notices.append(
                    PolicyNotice(
                        kind: .relockWarning, store: store.name, owner: first.owner,
                        until: dateFromMillis(wall + relock),
                        reason: "\(what) ends in \(formatDuration(relock)); shielded again then"))
            }
            // The next lead still to come: be evaluated when it is reached.
            if let next = Self.warningLeads.first(where: { $0 < covered && $0 < relock }) {
                nextLedgerEvent = min(nextLedgerEvent, ledger + relock - next)
                nextWallEvent = min(nextWallEvent, wall + relock - next)
            }
        }
    }

    private func timedWindow(_ window: UnlockWindow, in s: StoreState) -> TimedWindow? {
        switch window {
        case .gate: s.gate.window
        case .occurrence(let id): s.occurrences[id]?.window
        case .emergency: s.emergency?.window
        }
    }

    private mutating func markWarned(_ window: UnlockWindow, store name: String, lead: Int64) {
        switch window {
        case .gate: state.stores[name]?.gate.window?.warned = lead
        case .occurrence(let id): state.stores[name]?.occurrences[id]?.window?.warned = lead
        case .emergency: state.stores[name]?.emergency?.window.warned = lead
        }
    }

    /// Whether `store` would be shielded `offset` ms from now if nothing but time changed: its
    /// unlock windows that end by then ended, its manual lock still running, the schedule
    /// occurrence then holding it unless skipped or lifted, and no emergency unlock then.
    private mutating func shielded(_ store: StoreConfiguration, _ s: StoreState, after offset: Int64) -> Bool
    {
        let ledger = state.ledger
        if let e = s.emergency, e.window.remaining(ledger: ledger, wall: wall) > offset { return false }
        if store.gate != nil, (s.gate.window?.remaining(ledger: ledger, wall: wall) ?? 0) <= offset {
            return true
        }
        if let lock = s.manualLock, lock.window.remaining(ledger: restraintLedger, wall: wall) > offset {
            return true
        }
        for schedule in store.schedules {
            guard let o = schedule.occurrence(containing: wall + offset, resolver: resolver(for: schedule)),
                state.skips[o.id] == nil
            else { continue }
            if let w = s.occurrences[o.id]?.window, w.remaining(ledger: ledger, wall: wall) > offset {
                continue
            }
            return true
        }
        return false
    }

    /// Notes a window's ends; `offset` turns a window measured on the restraint ledger into
    /// ledger time.
    private func note(
        _ w: TimedWindow, _ ledgerEvent: inout Int64, _ wallEvent: inout Int64, offset: Int64 = 0
    ) {
        ledgerEvent = min(ledgerEvent, w.startLedger + w.length + offset)
        if w.wallBound { wallEvent = min(wallEvent, w.wallDeadline) }
    }

    /// Recomputes owners per store and turns owner changes into notices.
    private mutating func updateDesired() {
        var next: [String: DesiredStore] = [:]
        for store in configuration.stores {
            let s = state.stores[store.name] ?? StoreState()
            var owners: [String] = []
            if store.gate != nil, s.gate.window == nil { owners.append("gate") }
            for o in activeOccurrences[store.name] ?? [] where state.skips[o.id] == nil {
                if s.occurrences[o.id]?.window != nil { continue }
                owners.append("schedule:\(o.id)")
            }
            if let lock = s.manualLock { owners.append("lock:\(lock.by)") }
            let suspended = s.emergency != nil
            let shielded = !owners.isEmpty && !suspended && !store.selection.isEmpty
            let d = DesiredStore(owners: owners, suspended: suspended, shielded: shielded)
            next[store.name] = d
            let before = desired[store.name]
            if before != d { shieldsDirty = true }
            let previous = before?.owners ?? []
            for owner in previous where !owners.contains(owner) {
                let pending = pendingReasons["\(store.name)|\(owner)"]
                notices.append(
                    PolicyNotice(
                        kind: .ownerRemoved, store: store.name, owner: owner,
                        until: pending?.until.map(dateFromMillis),
                        reason: pending?.reason ?? defaultRemovalReason(owner)))
            }
            for owner in owners where !previous.contains(owner) {
                let pending = pendingReasons["\(store.name)|\(owner)"]
                notices.append(
                    PolicyNotice(
                        kind: .ownerAdded, store: store.name, owner: owner,
                        until: (pending?.until ?? holdEnd(owner: owner, store: store, state: s)).map(
                            dateFromMillis),
                        reason: pending?.reason ?? defaultAddReason(owner, store: store, state: s)))
            }
        }
        pendingReasons.removeAll(keepingCapacity: true)
        desired = next
    }

    private func holdEnd(owner: String, store: StoreConfiguration, state s: StoreState) -> Int64? {
        if owner.hasPrefix("schedule:") {
            return activeOccurrences[store.name]?.first { "schedule:\($0.id)" == owner }?.end
        }
        if owner.hasPrefix("lock:"), let w = s.manualLock?.window {
            return wall + w.remaining(ledger: restraintLedger, wall: wall)
        }
        return nil
    }

    private func defaultAddReason(_ owner: String, store: StoreConfiguration, state s: StoreState) -> String {
        if owner == "gate", let gate = store.gate, gate.isDaily {
            let paid = s.dailyPaid
            if paid < gate.goals.count {
                return "locked until \(gate.goals[paid].steps) steps are walked today"
            }
            return "locked until tomorrow: today's goals are met (\(gate.goals[0].steps) steps tomorrow)"
        }
        if owner == "gate" {
            let goal = store.gate?.goals.first?.steps ?? 0
            return "locked until \(goal) steps are walked"
        }
        if owner.hasPrefix("schedule:"),
            let o = activeOccurrences[store.name]?.first(where: { "schedule:\($0.id)" == owner }),
            let schedule = store.schedules.first(where: { $0.name == o.schedule })
        {
            var text =
                "schedule \(schedule.name) (\(schedule.start)–\(schedule.end) \(zoneIdentifier(for: schedule)))"
            if let goal = schedule.goal {
                text +=
                    "; \(goal.steps) steps lift it "
                    + (goal.minutes.map { "for \($0) min" } ?? "for the rest of the window")
            }
            return text
        }
        if owner.hasPrefix("lock:") { return "manual lock by \(owner.dropFirst(5))" }
        return "held"
    }

    private func defaultRemovalReason(_ owner: String) -> String {
        if owner.hasPrefix("schedule:") { return "occurrence ended" }
        if owner.hasPrefix("lock:") { return "lock ended" }
        return "released"
    }

    // MARK: - Steps

    private mutating func countSteps(_ count: Int) {
        let n = min(count, 1_000_000_000)
        rollDay()
        if let steps = state.today?.steps { state.today?.steps = min(steps + n, 1_000_000_000_000) }
        for store in configuration.stores {
            let name = store.name
            if let gate = store.gate, gate.isDaily {
                payDailyGoals(store: name, gate: gate)
            } else if let gate = store.gate {
                let g = Self.addSteps(n, to: &state.stores[name, default: StoreState()].gate)
                dirty = true
                let next = g.tier + 1 < gate.goals.count ? gate.goals[max(0, g.tier + 1)].steps : Int.max
                let capped = g.tier == -2 && restraintLedger < capBlockedUntil[name] ?? .min
                if g.steps >= next && !capped {
                    checkGate(store: name, gate: gate, state: g)
                }
            }
            if activeOccurrences.isEmpty { continue }
            guard let active = activeOccurrences[name] else { continue }
            for o in active where state.skips[o.id] == nil {
                guard let schedule = store.schedules.first(where: { $0.name == o.schedule }),
                    let goal = schedule.goal, var occ = state.stores[name]?.occurrences[o.id],
                    occ.window == nil
                else { continue }
                occ.steps = min(occ.steps + n, 1_000_000_000_000)
                dirty = true
                if occ.steps >= goal.steps {
                    let rest = o.end - wall
                    let length = goal.minutes.map { min(Self.millis(minutes: $0), rest) } ?? rest
                    if length > 0 {
                        occ.window = TimedWindow(
                            startWall: wall, startLedger: state.ledger, length: length, wallBound: true)
                        pendingReasons["\(name)|schedule:\(o.id)"] = (
                            "walked \(occ.steps) of \(goal.steps) steps in \(schedule.name): lifted "
                                + (goal.minutes == nil
                                    ? "for the rest of the window" : "for \(formatDuration(length))"),
                            wall + length
                        )
                        needsEvaluation = true
                    }
                }
                state.stores[name]?.occurrences[o.id] = occ
            }
        }
    }

    private static func addSteps(_ n: Int, to gate: inout GateState) -> GateState {
        gate.steps = min(gate.steps + n, 1_000_000_000_000)
        return gate
    }

    private mutating func checkGate(store name: String, gate: GateConfiguration, state g: GateState) {
        guard let reached = gate.goals.lastIndex(where: { g.steps >= $0.steps }), reached > g.tier else {
            return
        }
        let tier = gate.goals[reached]
        let length = Self.millis(minutes: tier.minutes)
        if let w = g.window {
            state.stores[name]?.gate.tier = reached
            extendGateUnlock(
                store: name, window: w, length: length,
                reason: "walked \(g.steps) steps (goal \(tier.steps)): unlock extended to \(tier.minutes) min"
            )
            return
        }
        let counted = countedUnlocks(store: name)
        if let cap = gate.dailyUnlockCap, counted.count >= cap {
            // Say so once per locked period; the steps keep counting.
            if g.tier != -2 {
                notices.append(
                    PolicyNotice(
                        kind: .refused, store: name, owner: "gate",
                        reason: "daily unlock cap of \(cap) reached; steps keep counting for tomorrow"))
                state.stores[name]?.gate.tier = -2
            }
            // Free again when enough of the counted unlocks' days have ended.
            capBlockedUntil[name] = cap == 0 ? .max : counted[counted.count - cap]
            return
        }
        state.stores[name]?.gate.tier = reached
        startGateUnlock(
            store: name, length: length,
            reason: "walked \(g.steps) steps (goal \(tier.steps)): unlocked for \(tier.minutes) min")
    }

    /// Gives the gate's running unlock window `length` in all (measured from its start) and says so.
    private mutating func extendGateUnlock(
        store name: String, window: TimedWindow, length: Int64, reason: String
    ) {
        var w = window
        w.length = length
        // The warnings before the new end that are still ahead are due again.
        w.warned = w.remaining(ledger: state.ledger, wall: wall)
        state.stores[name]?.gate.window = w
        let until = wall + w.remaining(ledger: state.ledger, wall: wall)
        notices.append(
            PolicyNotice(
                kind: .unlockExtended, store: name, owner: "gate", until: dateFromMillis(until),
                reason: reason))
        needsEvaluation = true
    }

    /// Opens the gate's unlock window now and records it for the daily cap.
    private mutating func startGateUnlock(store name: String, length: Int64, reason: String) {
        state.stores[name]?.gate.window = TimedWindow(
            startWall: wall, startLedger: state.ledger, length: length, wallBound: true)
        let r = resolver(for: nil)
        let unlock = GateUnlock(
            wall: wall, ledger: restraintLedger,
            dayEnd: r.instant(local: (r.localDay(wall) + 1) * millisPerDay))
        state.stores[name]?.unlocks.append(unlock)
        pendingReasons["\(name)|gate"] = (reason, wall + length)
        needsEvaluation = true
    }

    // MARK: - Daily goals

    /// Whether any gate counts the day's steps.
    private var hasDailyGoals: Bool { configuration.stores.contains { $0.gate?.isDaily ?? false } }

    /// The local day's tiers a daily gate has not paid yet and that today's steps reach.
    private func dailyTiersDue(store name: String, gate: GateConfiguration) -> ArraySlice<GoalTier> {
        let steps = state.today?.steps ?? 0
        let paid = min(state.stores[name]?.dailyPaid ?? 0, gate.goals.count)
        let reached = gate.goals.prefix { $0.steps <= steps }.count
        return reached > paid ? gate.goals[paid..<reached] : []
    }

    /// Pays a daily gate's tiers that today's steps reached: each once a day, its minutes added to
    /// a running unlock or opening one (subject to the daily cap).
    private mutating func payDailyGoals(store name: String, gate: GateConfiguration) {
        let due = dailyTiersDue(store: name, gate: gate)
        guard let goal = due.last?.steps else { return }
        let steps = state.today?.steps ?? 0
        state.stores[name, default: StoreState()].dailyPaid = due.endIndex
        dirty = true
        let minutes = min(due.reduce(0) { $0 + $1.minutes }, maximumWindowMinutes)
        let length = Self.millis(minutes: minutes)
        if let w = state.stores[name]?.gate.window {
            extendGateUnlock(
                store: name, window: w,
                length: min(w.length + length, Self.millis(minutes: maximumWindowMinutes)),
                reason: "walked \(steps) steps today (goal \(goal) today): \(minutes) min more")
            return
        }
        if let cap = gate.dailyUnlockCap, countedUnlocks(store: name).count >= cap {
            notices.append(
                PolicyNotice(
                    kind: .refused, store: name, owner: "gate",
                    reason:
                        "walked \(steps) steps today (goal \(goal) today), but the daily unlock cap of \(cap) is reached"
                ))
            return
        }
        startGateUnlock(
            store: name, length: length,
            reason: "walked \(steps) steps today (goal \(goal) today): unlocked for \(minutes) min")
    }

    /// Starts a new local day for the daily goals once the current one has ended in proven
    /// elapsed time. A day ends at its local midnight in the zone in force when it began, measured
    /// in elapsed time, like the daily cap's days: a clock set forward or a zone change does not
    /// end it early, and a reboot's unproven credit does not end it at all. A wall clock still on
    /// (or before) the day that ended was set back: the new day is the next one, a whole day long.
    private mutating func rollDay() {
        let proven = restraintLedger
        if let today = state.today, proven < today.endsLedger { return }
        let r = resolver(for: nil)
        var day = r.localDay(wall)
        var length = r.instant(local: (day + 1) * millisPerDay) - wall
        if let ended = state.today, day <= ended.day {
            day = ended.day + 1
            length = millisPerDay
        }
        state.today = DayTally(day: day, endsLedger: proven + min(max(length, 1), 2 * millisPerDay))
        for name in Array(state.stores.keys) where state.stores[name]?.dailyPaid != 0 {
            state.stores[name]?.dailyPaid = 0
        }
        dirty = true
    }

    /// The gate unlocks that count toward today's cap: each counts until the end of the local
    /// day on which it happened, in the zone in force then, measured in elapsed time. So neither
    /// a wall-clock jump nor a zone change ends its day early; a genuine midnight does.
    /// Returns the ledger times at which they stop counting, soonest first.
    private func countedUnlocks(store name: String) -> [Int64] {
        var ends: [Int64] = []
        for u in state.stores[name]?.unlocks ?? [] {
            let end = u.ledger + min(max(0, u.dayEnd - u.wall), 2 * millisPerDay)
            if restraintLedger < end { ends.append(end) }
        }
        return ends.sorted()
    }

    private func unlocksToday(store name: String) -> Int { countedUnlocks(store: name).count }

    // MARK: - Commands

    private mutating func run(_ command: PolicyCommand) {
        switch command {
        case .lock(let name, let duration, let by):
            let ms = durationMillis(duration)
            guard configuration.store(named: name) != nil else {
                notices.append(
                    PolicyNotice(kind: .refused, store: name, reason: "no store named \"\(name)\""))
                return
            }
            guard ms >= millisPerMinute, ms <= 366 * millisPerDay else {
                notices.append(
                    PolicyNotice(
                        kind: .refused, store: name, reason: "a lock must last between a minute and a year"))
                return
            }
            let window = TimedWindow(
                startWall: wall, startLedger: restraintLedger, length: ms, wallBound: false)
            if let existing = state.stores[name]?.manualLock,
                existing.window.remaining(ledger: restraintLedger, wall: wall) >= ms
            {
                notices.append(
                    PolicyNotice(
                        kind: .refused, store: name, owner: "lock:\(existing.by)",
                        until: dateFromMillis(
                            wall + existing.window.remaining(ledger: restraintLedger, wall: wall)),
                        reason: "already locked for longer"))
                return
            }
            state.stores[name, default: StoreState()].manualLock = HeldWindow(by: by, window: window)
            pendingReasons["\(name)|lock:\(by)"] = ("locked for \(formatDuration(ms)) by \(by)", wall + ms)
            dirty = true
            needsEvaluation = true
        case .skip(let scheduleName, let occurrence):
            skip(scheduleName, occurrence)
        case .emergencyUnlock(let name, let by):
            guard configuration.store(named: name) != nil else {
                notices.append(
                    PolicyNotice(kind: .refused, store: name, reason: "no store named \"\(name)\""))
                return
            }
            let allowance = configuration.emergency.perWeek
            let recent = state.emergencyUses.filter { restraintLedger - $0.stamp.ledger < Self.week }
            guard recent.count < allowance else {
                var reason =
                    "no emergency unlocks left: \(recent.count) of \(allowance) used in the last 7 days"
                if let oldest = recent.map(\.stamp.ledger).min() {
                    reason += "; the next frees up in \(formatDuration(oldest + Self.week - restraintLedger))"
                }
                notices.append(PolicyNotice(kind: .refused, store: name, reason: reason))
                return
            }
            let length = Self.millis(minutes: configuration.emergency.minutes)
            state.emergencyUses.append(
                EmergencyUse(store: name, by: by, stamp: Stamp(wall: wall, ledger: restraintLedger)))
            state.stores[name, default: StoreState()].emergency = HeldWindow(
                by: by,
                window: TimedWindow(
                    startWall: wall, startLedger: state.ledger, length: length, wallBound: true))
            notices.append(
                PolicyNotice(
                    kind: .emergencyStarted, store: name, until: dateFromMillis(wall + length),
                    reason: "emergency unlock by \(by) (\(recent.count + 1) of \(allowance) this week) "
                        + "lifts every owner for \(formatDuration(length))"))
            dirty = true
            needsEvaluation = true
        case .reload(let newConfiguration):
            do {
                try newConfiguration.validate()
            } catch {
                notices.append(PolicyNotice(kind: .refused, reason: "configuration not reloaded: \(error)"))
                return
            }
            configuration = newConfiguration
            resolvers.removeAll()
            pruneStores()
            dirty = true
            // A reload may add targets to a store that is shielded now: reconcile, so they are
            // applied at once rather than at the next lock change.
            shieldsDirty = true
            invalidateSchedules()
            notices.append(
                PolicyNotice(
                    kind: .configurationReloaded,
                    reason: "configuration reloaded: \(newConfiguration.stores.count) store(s)"))
        }
    }

    /// A configured length in milliseconds, bounded to 1 minute … 366 days (`validate()` rejects
    /// anything outside; an engine built from an unvalidated configuration must not trap).
    static func millis(minutes: Int) -> Int64 {
        Int64(min(max(minutes, 1), maximumWindowMinutes)) * millisPerMinute
    }

    private func durationMillis(_ d: Duration) -> Int64 {
        let (s, a) = d.components
        guard s < 1_000_000_000_000, s > -1_000_000_000_000 else { return s < 0 ? -1 : .max / 2 }
        return s * 1000 + a / 1_000_000_000_000_000
    }

    private mutating func skip(_ scheduleName: String, _ occurrence: String?) {
        guard
            let store = configuration.stores.first(where: {
                $0.schedules.contains { $0.name == scheduleName }
            }),
            let schedule = store.schedules.first(where: { $0.name == scheduleName })
        else {
            notices.append(PolicyNotice(kind: .refused, reason: "no schedule named \"\(scheduleName)\""))
            return
        }
        let r = resolver(for: schedule)
        let target: Occurrence?
        if let occurrence {
            var dayText = Substring(occurrence)
            if let at = occurrence.lastIndex(of: "@") {
                guard occurrence[..<at] == scheduleName else {
                    notices.append(
                        PolicyNotice(
                            kind: .refused, store: store.name,
                            reason: "occurrence \"\(occurrence)\" is not of schedule \(scheduleName)"))
                    return
                }
                dayText = occurrence[occurrence.index(after: at)...]
            }
            guard let day = parseDay(dayText) else {
                notices.append(
                    PolicyNotice(
                        kind: .refused, store: store.name,
                        reason: "expected an occurrence date YYYY-MM-DD, found \"\(occurrence)\""))
                return
            }
            target = schedule.occurrence(onDay: day, resolver: r)
            if target == nil {
                notices.append(
                    PolicyNotice(
                        kind: .refused, store: store.name,
                        reason: "schedule \(scheduleName) has no window starting on \(formatDay(day))"))
                return
            }
        } else {
            target = schedule.currentOrNextOccurrence(after: wall, resolver: r)
        }
        guard let target, target.end > wall else {
            notices.append(
                PolicyNotice(
                    kind: .refused, store: store.name, reason: "that occurrence of \(scheduleName) is over"))
            return
        }
        if state.skips[target.id] != nil {
            notices.append(
                PolicyNotice(
                    kind: .refused, store: store.name, owner: "schedule:\(target.id)",
                    reason: "\(target.id) is already skipped"))
            return
        }
        state.skips[target.id] = target.end
        notices.append(
            PolicyNotice(
                kind: .skipped, store: store.name, owner: "schedule:\(target.id)",
                until: dateFromMillis(target.end),
                reason: "\(target.id) marked done; the schedule itself is unchanged"))
        pendingReasons["\(store.name)|schedule:\(target.id)"] = ("skipped", target.end)
        dirty = true
        needsEvaluation = true
    }

    private mutating func pruneStores() {
        let names = Set(configuration.stores.map(\.name))
        for name in state.stores.keys where !names.contains(name) { state.stores[name] = nil }
        for (name, s) in state.stores {
            guard let store = configuration.store(named: name) else { continue }
            var fixed = s
            if store.gate == nil { fixed.gate = GateState() }
            if let gate = store.gate, fixed.gate.tier >= gate.goals.count {
                fixed.gate.tier = gate.goals.count - 1
            }
            fixed.dailyPaid =
                store.gate?.isDaily == true ? min(fixed.dailyPaid, store.gate?.goals.count ?? 0) : 0
            if fixed != s { state.stores[name] = fixed }
        }
    }

    // MARK: - Fail closed

    /// A problem's text without its leading timestamp (`2025-03-01T09:02:00.123Z: `, of any
    /// length); a problem without one (from loading the state) is returned whole.
    static func problemText(_ problem: String) -> Substring {
        guard let separator = problem.firstRange(of: ": "),
            parseISO8601(String(problem[..<separator.lowerBound])) != nil
        else { return Substring(problem) }
        return problem[separator.upperBound...]
    }

    /// Records a problem, stamped with the wall time; the same problem recorded earlier is
    /// replaced, so a recurring failure is listed once (with its latest time).
    private mutating func addProblem(_ text: String) {
        problems.removeAll { Self.problemText($0) == text }
        problems.append("\(formatISO8601(wall)): \(text)")
        if problems.count > 20 { problems.removeFirst(problems.count - 20) }
    }

    /// Ends every unlock (gate, schedule goals, emergency) at once.
    private mutating func failClosed(_ reason: String) {
        let known = problems.last.map { Self.problemText($0) == "\(reason); locked" } ?? false
        addProblem("\(reason); locked")
        var revoked = false
        for name in Array(state.stores.keys) {
            guard var s = state.stores[name] else { continue }
            if s.gate.window != nil {
                s.gate = GateState(lockedSince: wall)
                pendingReasons["\(name)|gate"] = ("locked again: \(reason)", nil)
                revoked = true
            }
            for (id, var o) in s.occurrences where o.window != nil {
                o.window = nil
                o.steps = 0
                s.occurrences[id] = o
                pendingReasons["\(name)|schedule:\(id)"] = ("locked again: \(reason)", o.end)
                revoked = true
            }
            if s.emergency != nil {
                s.emergency = nil
                revoked = true
            }
            state.stores[name] = s
        }
        // A failure that keeps recurring while nothing is unlocked is said once.
        if revoked || !known {
            notices.append(
                PolicyNotice(
                    kind: .failClosed,
                    reason: revoked ? "\(reason); locked again" : "\(reason); already locked"))
        }
        if revoked {
            dirty = true
            needsEvaluation = true
        }
    }

    // MARK: - Reconcile

    /// Compares what the stores require with what the shields are known to have applied and
    /// returns only the difference. Targets another store requires are never removed.
    /// Forgets that `store`'s shield failed.
    private mutating func clearShieldProblem(_ store: String) {
        problems.removeAll { Self.problemText($0).hasPrefix("shield for \(store) failed") }
    }

    /// Whether a failure of `store`'s shield is listed.
    private func hasShieldProblem(_ store: String) -> Bool {
        problems.contains { Self.problemText($0).hasPrefix("shield for \(store) failed") }
    }

    private mutating func reconcile() -> [PolicyEffect] {
        shieldsDirty = false
        var required: [String: Set<Target>] = [:]
        var all = Set<Target>()
        for store in configuration.stores where desired[store.name]?.shielded == true {
            let targets = store.selection.targets
            required[store.name] = targets
            all.formUnion(targets)
        }
        var effects: [PolicyEffect] = []
        var names = configuration.stores.map(\.name)
        for name in applied.keys.sorted() where configuration.store(named: name) == nil { names.append(name) }
        for name in names {
            let want = required[name] ?? []
            let selection = configuration.store(named: name)?.selection.targets ?? []
            let known = knownApplied.contains(name)
            let have = applied[name] ?? []
            let add = known ? want.subtracting(have) : want
            let drop = (known ? have.subtracting(want) : selection.union(have).subtracting(want)).subtracting(
                all)
            if !add.isEmpty {
                effects.append(
                    .apply(
                        store: name, selection: Selection(targets: add), owners: desired[name]?.owners ?? []))
            }
            if !drop.isEmpty {
                effects.append(.remove(store: name, selection: Selection(targets: drop)))
            }
            // Not known after a failure: the store is asked for again in full, and its failure
            // stays listed until that attempt is known to have gone through (see `retrying`),
            // or at once when nothing of its own is left to enforce.
            if !known, hasShieldProblem(name) {
                if add.isEmpty && drop.isEmpty { clearShieldProblem(name) } else { retrying.insert(name) }
            }
            if configuration.store(named: name) == nil {
                applied[name] = nil
                knownApplied.remove(name)
            } else {
                applied[name] = want
                knownApplied.insert(name)
            }
        }
        return effects
    }

    // MARK: - Wake-ups

    private func nextWake() -> Int64? {
        var best: Int64?
        if nextLedgerEvent != .max && nextLedgerEvent != .min {
            best = mono + nextLedgerEvent - state.ledger
        }
        if nextWallEvent != .max && nextWallEvent != .min {
            let t = mono + nextWallEvent - wall
            best = min(best ?? t, t)
        }
        if let retryAt, retryAt > mono { best = min(best ?? retryAt, retryAt) }
        if timedWindowRunning, let checkpoint = nextCheckpoint {
            // Never sooner than a second from now, so a save that cannot be made yet (the answer
            // to a failed batch) does not make the engine ask to be woken at once, again and again.
            let t = max(mono + checkpoint - state.ledger, mono + 1000)
            best = min(best ?? t, t)
        }
        return best.map { max($0, mono + 1) }
    }

    // MARK: - Status

    private mutating func currentStatus() -> PolicyStatus {
        var stores: [PolicyStatus.Store] = []
        for store in configuration.stores {
            let s = state.stores[store.name] ?? StoreState()
            let d = desired[store.name]
            var entry = PolicyStatus.Store(
                name: store.name, shielded: d?.shielded ?? false, owners: d?.owners ?? [],
                steps: s.gate.steps,
                unlocksToday: unlocksToday(store: store.name), dailyUnlockCap: store.gate?.dailyUnlockCap)
            if let w = s.gate.window {
                entry.unlockedUntil = dateFromMillis(wall + w.remaining(ledger: state.ledger, wall: wall))
            }
            if let e = s.emergency {
                entry.emergencyUntil = dateFromMillis(
                    wall + e.window.remaining(ledger: state.ledger, wall: wall))
            }
            if let gate = store.gate, gate.isDaily {
                entry.steps = state.today?.steps ?? 0
                entry.goalIsDaily = true
                entry.nextGoal = gate.goals.dropFirst(s.dailyPaid).first?.steps
            } else if let gate = store.gate {
                entry.nextGoal = gate.goals.first { $0.steps > s.gate.steps }?.steps
            }
            if store.selection.isEmpty, !(d?.owners.isEmpty ?? true) {
                entry.note = "empty selection: nothing to shield"
            }
            stores.append(entry)
        }
        let used = state.emergencyUses.filter { restraintLedger - $0.stamp.ledger < Self.week }.count
        var status = PolicyStatus(
            stores: stores, emergencyRemaining: max(0, configuration.emergency.perWeek - used),
            problems: problems)
        // The next thing the policy does by itself (a relock, a schedule's start or end, a new
        // day), not the saves and retries it wakes up for as well.
        var next: Int64?
        let (ledgerEvent, wallEvent) = nextChangeEvents
        if ledgerEvent != .max && ledgerEvent != .min { next = wall + ledgerEvent - state.ledger }
        if wallEvent != .max && wallEvent != .min { next = min(next ?? wallEvent, wallEvent) }
        status.nextChange = next.map(dateFromMillis)
        return status
    }
}

import Foundation
import StepDetection
import StepGateTestSupport
import Testing

@testable import Tuning

@Suite("Tuning across sets")
struct MultiSetTests {
    static func recording(
        _ name: String, set: String, session: String, kind: LabelledRecording.Kind = .walk,
        placement: String = "wrist"
    ) -> LabelledRecording {
        LabelledRecording(
            path: "/\(set)/\(name).csv", name: name, format: nil, placement: placement, kind: kind,
            truth: kind == .nowalk ? 0 : 100, set: set, session: session)
    }

    @Test func foldsKeepASessionTogether() {
        var recordings: [LabelledRecording] = []
        for s in 0..<12 {
            for r in 0..<(s % 3 + 1) {
                recordings.append(Self.recording("s\(s)-\(r)", set: "a", session: "session \(s)"))
            }
        }
        let folds = CrossValidation.folds(recordings, k: 4, seed: 3)
        #expect(folds.count == 4)
        #expect(folds.flatMap { $0 }.sorted() == Array(recordings.indices))
        for fold in folds {
            let sessions = Set(fold.map { recordings[$0].session })
            for session in sessions {
                let members = recordings.indices.filter { recordings[$0].session == session }
                #expect(Set(members).isSubset(of: Set(fold)), "\(session) split across folds")
            }
        }
        let sizes = folds.map(\.count)
        #expect(sizes.max()! - sizes.min()! <= 3, "\(sizes)")
    }

    @Test func leaveOneSetOutHoldsOutEachSetWhole() {
        let recordings = [
            Self.recording("a1", set: "phones", session: "1"),
            Self.recording("a2", set: "phones", session: "2"),
            Self.recording("b1", set: "watch", session: "3"),
            Self.recording("d1", set: DailyLifeBench.setName, session: "4", kind: .mixed),
        ]
        let splits = CrossValidation.setSplits(recordings)
        #expect(splits.map(\.set) == ["phones", "watch"])
        #expect(splits[0].heldOut == [0, 1])
        #expect(splits[1].heldOut == [2])
        #expect(CrossValidation.setSplits(Array(recordings.prefix(2))).isEmpty)
    }

    @Test func theObjectiveWeighsSetsAndTheWorstSet() {
        func result(_ set: String, counted: Int) -> EvaluationResult {
            EvaluationResult(
                recording: Self.recording("r", set: set, session: set), counted: counted, hours: 0.01,
                samples: 1)
        }
        var objective = Objective(falseStepWeight: 0.1, mixedWeight: 0.01, placementWeight: 0)
        objective.worstSetWeight = 0.5
        // Set a: 2 % off, set b: 10 % off.
        let results = [result("a", counted: 102), result("b", counted: 90)]
        #expect(abs(objective.value(results) - (6 + 0.5 * 10)) < 1e-9)
        objective.setWeights = ["b": 3]
        #expect(abs(objective.value(results) - ((2 + 3 * 10) / 4 + 0.5 * 10)) < 1e-9)
        // One set: the plain formula.
        #expect(abs(objective.value([result("a", counted: 102)]) - 2) < 1e-9)
        // Days add their weighted error, and stay out of the sets' figures.
        objective.dailyLifeWeight = 0.2
        let day = EvaluationResult(
            recording: Self.recording("d", set: DailyLifeBench.setName, session: "d", kind: .mixed),
            counted: 120,
            hours: 2, samples: 1)
        #expect(abs(objective.value(results + [day]) - ((2 + 3 * 10) / 4 + 0.5 * 10 + 0.2 * 20)) < 1e-9)
        #expect(EvaluationSummary(results + [day]).mixedError == nil)
    }

    @Test func sessionsComeFromSplitGroupsOrOxfordFolders() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "stepgate-sets-\(getpid())")
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let manifest = """
            path,format,placement,device,kind,truth_steps,truth_source
            w1.csv,stepgate,wrist,Pebble,walk,100,told
            w2.csv,stepgate,wrist,Pebble,walk,100,told
            w3.csv,stepgate,wrist,Pebble,walk,100,told
            Phone_Hand_1/accelerometer.csv,oxford-ns,hand,Pixel,walk,100,switches
            """
        try manifest.write(
            to: folder.appendingPathComponent("manifest.csv"), atomically: true, encoding: .utf8)
        let detail = """
            name,note,split_group
            w1,walk,wearer-a
            w2,walk,wearer-a
            w3,walk,wearer-b
            """
        try detail.write(to: folder.appendingPathComponent("detail.csv"), atomically: true, encoding: .utf8)
        let recordings = try LabelledSets.load([folder.appendingPathComponent("manifest.csv").path]) { _ in }
        #expect(recordings.count == 4)
        #expect(recordings[0].session == recordings[1].session)
        #expect(recordings[0].session != recordings[2].session)
        #expect(recordings[3].session.hasSuffix("Phone_Hand_1/"))
        // Two formats in one manifest: one set per format.
        let name = folder.lastPathComponent
        #expect(
            recordings.map(\.set) == [
                name + "/stepgate", name + "/stepgate", name + "/stepgate", name + "/oxford",
            ])
    }
}

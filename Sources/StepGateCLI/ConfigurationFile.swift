import Formatting
import Foundation
import StepDetection
import StepGateDaemon
import SystemFiles
import Tuning
import TypedJSON
import UnlockPolicy

/// Writes a detector configuration as pretty JSON with sorted keys.
func encodeDetectorConfiguration(_ configuration: DetectorConfiguration) -> String {
    (try? JSONEncoding.encode(configuration, sortedKeys: true))?.prettySerialized() ?? "{}"
}

/// The operating system's reason behind a Foundation file error ("Permission denied"), rather
/// than Foundation's own text ("The operation could not be completed").
func systemReason(_ error: any Error) -> String {
    var current: NSError? = error as NSError
    while let ns = current {
        if ns.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(ns.code))) }
        current = ns.userInfo[NSUnderlyingErrorKey] as? NSError
    }
    if let posix = error as? POSIXError { return String(cString: strerror(posix.code.rawValue)) }
    let ns = error as NSError
    if ns.domain == NSCocoaErrorDomain {
        switch ns.code {
        case NSFileNoSuchFileError, NSFileReadNoSuchFileError: return "No such file or directory"
        case NSFileReadNoPermissionError, NSFileWriteNoPermissionError: return "Permission denied"
        case NSFileWriteOutOfSpaceError: return "No space left on device"
        case NSFileWriteVolumeReadOnlyError: return "Read-only file system"
        default: break
        }
    }
    return ns.localizedDescription
}

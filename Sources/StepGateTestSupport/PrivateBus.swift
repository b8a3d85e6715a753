import Foundation

/// A private session bus for a test: `dbus-daemon` with a configuration of its own, as the
/// standard session one but with no service activation. With the standard one, a bus asked for
/// `org.freedesktop.Notifications` that nobody serves starts whatever notification daemon is
/// installed (dunst, without a display), and the call waits on it instead of failing at once.
public enum PrivateBus {
    /// The command line of a bus listening on `socket`; its configuration is written beside
    /// the socket (mode 0644, so a bus run as another user reads it).
    public static func command(socket: String) throws -> [String] {
        let config = socket + ".conf"
        let text = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>

            """
        try text.write(toFile: config, atomically: false, encoding: .utf8)
        chmod(config, 0o644)
        return [
            "/usr/bin/dbus-daemon", "--config-file=\(config)", "--nofork", "--nopidfile",
            "--address=unix:path=\(socket)",
        ]
    }
}

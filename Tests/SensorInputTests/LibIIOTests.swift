import Testing

@testable import SensorInput

/// libiio is opened on first use: every function StepGate calls must resolve in the
/// installed library (ScanTypeTests then call through them against libiio's own decoding).
@Suite("libiio, opened on first use")
struct LibIIOTests {
    @Test func everyFunctionResolves() throws {
        try LibIIO.load()
        #expect(LibIIO.soname == "libiio.so.0")
    }

    @Test func anXMLContextListsItsDevices() throws {
        let context = try IIOContext(
            xml: """
                <?xml version="1.0" encoding="utf-8"?>\(LibIIOConversion.dtd)<context name="xml" \
                version-major="0" version-minor="24" version-git="v0.24"><device id="iio:device0" \
                name="lis3dh"><channel id="accel_x" type="input"><scan-element index="0" \
                format="le:s12/16&gt;&gt;4"/></channel></device></context>
                """)
        let devices = context.devices
        #expect(devices.count == 1)
        #expect(devices.first.map(IIODevice.name) == "lis3dh")
    }
}

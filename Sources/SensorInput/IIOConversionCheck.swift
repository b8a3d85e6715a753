internal import CLibIIO

/// libiio's own decoding of scan elements, for tests that check ``ScanType`` against
/// `iio_channel_convert` without any device: a context built from XML with one channel per
/// type string.
enum LibIIOConversion {
    /// The DTD libiio 0.24 validates context XML against.
    static let dtd = """
        <!DOCTYPE context [<!ELEMENT context (device | context-attribute)*><!ELEMENT context-attribute EMPTY>\
        <!ELEMENT device (channel | attribute | debug-attribute | buffer-attribute)*>\
        <!ELEMENT channel (scan-element?, attribute*)><!ELEMENT attribute EMPTY><!ELEMENT scan-element EMPTY>\
        <!ELEMENT debug-attribute EMPTY><!ELEMENT buffer-attribute EMPTY>\
        <!ATTLIST context name CDATA #REQUIRED version-major CDATA #REQUIRED version-minor CDATA #REQUIRED \
        version-git CDATA #REQUIRED description CDATA #IMPLIED>\
        <!ATTLIST context-attribute name CDATA #REQUIRED value CDATA #REQUIRED>\
        <!ATTLIST device id CDATA #REQUIRED name CDATA #IMPLIED label CDATA #IMPLIED>\
        <!ATTLIST channel id CDATA #REQUIRED type (input|output) #REQUIRED name CDATA #IMPLIED>\
        <!ATTLIST scan-element index CDATA #REQUIRED format CDATA #REQUIRED scale CDATA #IMPLIED>\
        <!ATTLIST attribute name CDATA #REQUIRED filename CDATA #IMPLIED>\
        <!ATTLIST debug-attribute name CDATA #REQUIRED><!ATTLIST buffer-attribute name CDATA #REQUIRED>]>
        """

    /// Decodes `bytes` (one stored value of `type`) with `iio_channel_convert`, returning the
    /// value sign- or zero-extended to 64 bits, and libiio's own view of the format.
    ///
    /// The corresponding libiio function is `iio_channel_convert`.
    static func convert(_ bytes: [UInt8], type: String) throws(IIOError) -> (value: Int64, format: ScanType?)
    {
        let escaped = type.split(separator: ">", omittingEmptySubsequences: false).joined(separator: "&gt;")
        let xml = """
            <?xml version="1.0" encoding="utf-8"?>\(dtd)<context name="xml" version-major="0" \
            version-minor="24" version-git="v0.24"><device id="iio:device0" name="test">\
            <channel id="accel_x" type="input"><scan-element index="0" format="\(escaped)"/></channel>\
            </device></context>
            """
        let context = try IIOContext(xml: xml)
        guard let device = context.devices.first, let channel = IIODevice.channel(device, "accel_x") else {
            throw IIOError(code: 2, operation: "iio_device_find_channel", subject: "xml test context")
        }
        let format = IIODevice.scanType(channel)
        var output = [UInt8](repeating: 0, count: 8)
        var input = bytes + [UInt8](repeating: 0, count: 8)
        output.withUnsafeMutableBytes { out in
            input.withUnsafeMutableBytes { inp in
                iio_channel_convert(channel, out.baseAddress, inp.baseAddress)
            }
        }
        let storage = format?.storageBytes ?? 8
        var word: UInt64 = 0
        for i in stride(from: storage - 1, through: 0, by: -1) { word = word << 8 | UInt64(output[i]) }
        let signed = format?.sign == .signed
        if storage < 8 && signed && word & (1 << UInt64(storage * 8 - 1)) != 0 {
            word |= ~((1 << UInt64(storage * 8)) - 1)
        }
        return (Int64(bitPattern: word), format)
    }
}

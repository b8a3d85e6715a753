#!/usr/bin/python3
# The system test's desktop: a notification server on the user's session bus (as a user unit,
# started with the user's manager), appending every notice it is given to the file named by its
# argument: "HH:MM:SS app: summary | body".
import sys
import time

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

INTERFACE = "org.freedesktop.Notifications"


class NoticeServer(dbus.service.Object):
    def __init__(self, bus, log):
        super().__init__(bus, "/org/freedesktop/Notifications")
        self.log = log
        self.next_id = 1

    @dbus.service.method(INTERFACE, in_signature="susssasa{sv}i", out_signature="u")
    def Notify(self, app, replaces, icon, summary, body, actions, hints, timeout):
        notice_id = replaces or self.next_id
        self.next_id += 1
        self.log.write(f"{time.strftime('%H:%M:%S')} {app}: {summary} | {body}\n")
        return notice_id

    @dbus.service.method(INTERFACE, out_signature="as")
    def GetCapabilities(self):
        return ["body", "actions"]

    @dbus.service.method(INTERFACE, out_signature="ssss")
    def GetServerInformation(self):
        return ("stepgate-system-test", "StepGate", "1", "1.2")

    @dbus.service.method(INTERFACE, in_signature="u")
    def CloseNotification(self, notice_id):
        pass


dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
log = open(sys.argv[1], "a", buffering=1)
name = dbus.service.BusName(INTERFACE, bus)
server = NoticeServer(bus, log)
GLib.MainLoop().run()

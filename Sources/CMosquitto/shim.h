#pragma once
// libmosquitto 2.0 (Debian package libmosquitto-dev). Imported only by Household, for the types:
// the executable does not link libmosquitto; Household/LibMosquitto.swift opens it when a
// daemon's configuration has an "mqtt" section.
#include <mosquitto.h>
#include <mqtt_protocol.h>

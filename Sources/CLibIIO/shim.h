#pragma once
// libiio 0.24 (Debian package libiio-dev). Imported only by SensorInput, for the types: the
// executable does not link libiio; SensorInput/LibIIO.swift opens it when first needed.
#include <iio.h>

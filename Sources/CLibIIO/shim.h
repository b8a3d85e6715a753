#pragma once
// libiio 0.24 (Debian package libiio-dev; pkg-config "libiio"). Imported only by SensorInput.
#include <iio.h>

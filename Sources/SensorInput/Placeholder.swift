public enum SensorInputPlaceholder {}

"""Clocks, temperature and power through NVML (nvidia-ml-py). Read only: the
tuner never changes clocks or power limits."""

from __future__ import annotations


class NvmlClocks:
    """NVML readings for the device with PCI bus id ``pci_bus_id`` (the CUDA
    device the measurement runs on; NVML may number devices differently)."""

    def __init__(self, pci_bus_id: str) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode() if isinstance(pci_bus_id, str) else pci_bus_id)
        self._max_sm = float(pynvml.nvmlDeviceGetMaxClockInfo(self.handle, pynvml.NVML_CLOCK_SM))

    def sm_clock_mhz(self) -> float:
        return float(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))

    def max_sm_clock_mhz(self) -> float:
        return self._max_sm

    def max_mem_clock_mhz(self) -> float:
        return float(self.nvml.nvmlDeviceGetMaxClockInfo(self.handle, self.nvml.NVML_CLOCK_MEM))

    def energy_mj(self) -> int | None:
        """NVML's total-energy counter: millijoules since the driver was last
        loaded (Volta and newer; no root needed). It advances only when the
        board's power sensor updates (about every 100 ms on an H100), which is
        why ``tuner.measure.energy`` aligns its windows to its changes. None
        where the device or driver does not support it."""
        try:
            return int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))
        except self.nvml.NVMLError:
            return None

    def snapshot(self) -> dict[str, float]:
        nvml = self.nvml
        return {
            "mem_clock_mhz": float(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_MEM)),
            "temperature_c": float(nvml.nvmlDeviceGetTemperature(self.handle, nvml.NVML_TEMPERATURE_GPU)),
            "power_w": nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0,
        }

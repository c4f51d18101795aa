// SIGTERM/SIGINT make a workload stop launching, drain its queue and print its
// summary, so a killed job still reports what it did.
#pragma once

namespace egpu::workload {

// Installs handlers for SIGTERM and SIGINT (without SA_RESTART, so sleeps wake).
void install_stop_handlers();

bool stop_requested();

// The signal that asked to stop, or 0.
int stop_signal_number();

}  // namespace egpu::workload

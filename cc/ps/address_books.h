// What the scheduler tells each node about the job once every node registered (ADDRESS_BOOK): where the
// servers listen, how many worker processes there are, whether partitions cross the network in slices, and
// the tokens by which workers prove their ranks to the servers.
#pragma once

#include "cc/common/config.h"
#include "cc/ps/job_membership.h"
#include "cc/ps/message.h"

namespace bps {

// The job's book (of a started membership): servers by rank, every worker's token, the slice size.
AddressBook JobAddressBook(const Config& config, const JobMembership& members);

// The book member `peer` gets: its rank; a server also how many worker processes share its host, a worker
// its own token only.
AddressBook AddressBookFor(const AddressBook& job, const JobMembership& members, PeerId peer);

}  // namespace bps

/*
 * The block I/O model of DTrace's D library over the Linux struct bio (kernels 6.10 and later:
 * the partition number in block_device.__bd_flags): bufinfo_t and devinfo_t.
 *
 * Not available: b_addr (a bio has a vector of pages, not one address) and b_resid are 0;
 * dev_name would be the driver's name from the kernel's major_names table, which these plain
 * loads cannot reach: "". dev_instance is 0, as DTrace on Linux defines it.
 *
 * The kernel's dev_t is 32 bits where D's is 64: bd_dev is read as the uint32_t it is.
 *
 * The io provider's probes fire on block requests (struct request, translated the same way: a
 * request is one or more merged bios to one device). From a request, b_error is 0 (the status
 * reaches block_rq_complete beside the request, not in it) and b_iodone is the request's end_io
 * (0 for most requests, which complete through their bios). A request without a block device
 * (none was seen in testing; a flush the block layer makes itself might be one) has
 * dev_statname and dev_pathname "<unknown>" and device numbers 0.
 */

typedef struct bufinfo {
	int b_flags;			/* B_READ or B_WRITE, B_ASYNC */
	size_t b_bcount;		/* number of bytes */
	caddr_t b_addr;			/* buffer address: 0 */
	uint64_t b_lblkno;		/* block number (512-byte sectors) */
	uint64_t b_blkno;		/* block number (512-byte sectors) */
	size_t b_resid;			/* bytes not transferred: 0 */
	size_t b_bufsize;		/* size of the buffer */
	caddr_t b_iodone;		/* completion routine */
	int b_error;			/* blk_status_t of the I/O */
	dev_t b_edev;			/* device (major << 20 | minor) */
} bufinfo_t;

inline int B_BUSY = 0x000001;
inline int B_DONE = 0x000002;
inline int B_ERROR = 0x000004;
inline int B_PAGEIO = 0x000010;
inline int B_PHYS = 0x000020;
inline int B_READ = 0x000040;
inline int B_WRITE = 0x000100;
inline int B_ASYNC = 0x000400;

typedef struct devinfo {
	int dev_major;			/* major number */
	int dev_minor;			/* minor number */
	int dev_instance;		/* instance number: 0 */
	string dev_name;		/* driver name: "" (see above) */
	string dev_statname;		/* disk name and partition number (sda1) */
	string dev_pathname;		/* /dev/ path of the device */
} devinfo_t;

/* odd request operations write (REQ_OP_WRITE = 1 ...); REQ_SYNC is bit 11 */
translator bufinfo_t < struct bio *B > {
	b_flags = ((B->bi_opf & 1) ? B_WRITE : B_READ) | ((B->bi_opf & (1 << 11)) ? 0 : B_ASYNC);
	b_bcount = B->bi_iter.bi_size;
	b_addr = 0;
	b_lblkno = B->bi_iter.bi_sector;
	b_blkno = B->bi_iter.bi_sector;
	b_resid = 0;
	b_bufsize = B->bi_iter.bi_size;
	b_iodone = (caddr_t)B->bi_end_io;
	b_error = B->bi_status;
	b_edev = B->bi_bdev ? *(uint32_t *)&B->bi_bdev->bd_dev : 0;
};

translator devinfo_t < struct bio *B > {
	dev_major = B->bi_bdev ? *(uint32_t *)&B->bi_bdev->bd_dev >> 20 : 0;
	dev_minor = B->bi_bdev ? *(uint32_t *)&B->bi_bdev->bd_dev & 0xfffff : 0;
	dev_instance = 0;
	dev_name = "";
	dev_statname = B->bi_bdev == 0 ? "nfs" :
	    (B->bi_bdev->__bd_flags.counter & 0xff) == 0 ?
	    stringof(B->bi_bdev->bd_disk->disk_name) :
	    strjoin(stringof(B->bi_bdev->bd_disk->disk_name),
	    lltostr(B->bi_bdev->__bd_flags.counter & 0xff));
	dev_pathname = B->bi_bdev == 0 ? "<nfs>" :
	    (B->bi_bdev->__bd_flags.counter & 0xff) == 0 ?
	    strjoin("/dev/", stringof(B->bi_bdev->bd_disk->disk_name)) :
	    strjoin("/dev/", strjoin(stringof(B->bi_bdev->bd_disk->disk_name),
	    lltostr(B->bi_bdev->__bd_flags.counter & 0xff)));
};

/* a request's operation and flags are those of its bios (cmd_flags is their bi_opf) */
translator bufinfo_t < struct request *R > {
	b_flags = ((R->cmd_flags & 1) ? B_WRITE : B_READ) | ((R->cmd_flags & (1 << 11)) ? 0 : B_ASYNC);
	b_bcount = R->__data_len;
	b_addr = 0;
	b_lblkno = R->__sector;
	b_blkno = R->__sector;
	b_resid = 0;
	b_bufsize = R->__data_len;
	b_iodone = (caddr_t)R->end_io;
	b_error = 0;
	b_edev = R->part ? *(uint32_t *)&R->part->bd_dev : 0;
};

translator devinfo_t < struct request *R > {
	dev_major = R->part ? *(uint32_t *)&R->part->bd_dev >> 20 : 0;
	dev_minor = R->part ? *(uint32_t *)&R->part->bd_dev & 0xfffff : 0;
	dev_instance = 0;
	dev_name = "";
	dev_statname = R->part == 0 ? "<unknown>" :
	    (R->part->__bd_flags.counter & 0xff) == 0 ?
	    stringof(R->part->bd_disk->disk_name) :
	    strjoin(stringof(R->part->bd_disk->disk_name),
	    lltostr(R->part->__bd_flags.counter & 0xff));
	dev_pathname = R->part == 0 ? "<unknown>" :
	    (R->part->__bd_flags.counter & 0xff) == 0 ?
	    strjoin("/dev/", stringof(R->part->bd_disk->disk_name)) :
	    strjoin("/dev/", strjoin(stringof(R->part->bd_disk->disk_name),
	    lltostr(R->part->__bd_flags.counter & 0xff)));
};
